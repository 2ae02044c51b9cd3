// tuner/corpus.hpp — the cost models' training corpus: a versioned recipe (ops/corpus/*.json)
// that anyone can run on their own hardware to collect the same kind of records unattended.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir/workload.hpp"

namespace tiletune::tuner {

//! One workload of the corpus: an op's text and sizes, and where it came from.
struct CorpusCase {
  std::string op_text, op_name, sizes;
  std::string source;  //!< "library", "file:<path>", "generated:<kind>" or "onnx:<model>"
  ir::Workload workload;  //!< the op bound to the sizes
};

//! One pass over every workload: random configs (with the seed configs) until it has
//! trials - guided records, then configs proposed by the model-guided search until it has
//! `trials`. Records already there count, so a later phase extends an earlier one.
struct CorpusPhase {
  int trials = 32;
  int guided = 12;
};

//! A recipe: which ops at which sizes, and how each is measured.
struct CorpusRecipe {
  std::string name;
  int version = 1;
  std::uint64_t seed = 1;
  //! In order, each over all workloads before the next: a corpus grown from a smaller one is
  //! collected again the same way. A recipe's "trials" and "guided" are one phase.
  std::vector<CorpusPhase> phases;
  //! Side-by-side sessions each workload's labels are timed in, once its last phase is
  //! measured (tuner::label_side_by_side); earlier phases' labels take one.
  int label_sessions = 1;
  double max_flops = 4e8;
  nlohmann::json json;  //!< the whole recipe: library entries, generated ops, ONNX models
  //! The recipe file's folder, which a library entry's .tile path is relative to (empty: the
  //! working directory, as for a recipe shipped with tiletune).
  std::string dir;
};

//! Error(InvalidInput) naming the field for a malformed recipe; `where` names it in messages.
//! A recipe's "base" names a shipped recipe whose fields it takes where it gives none.
CorpusRecipe parse_recipe(const std::string& text, const std::string& where);

//! The recipe's workloads in a fixed order (library sizes and generated ops drawn from its
//! seed). ONNX models that are missing or do not import are left out with a line in `notes`.
std::vector<CorpusCase> corpus_cases(const CorpusRecipe& recipe, std::vector<std::string>* notes);

}  // namespace tiletune::tuner
