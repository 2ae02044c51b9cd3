// ops/library.hpp
#pragma once
#include <string>
#include <vector>

#include "ir/op.hpp"

namespace tiletune::ops {

//! The operator library (ops/*.tile), suites (ops/suites/*.json) and corpus recipes, compiled into tiletune
//! so that the binary needs no data files.
std::vector<std::string> op_names();
//! Text of the library op `name`; Error(NotFound) listing the names if there is none.
std::string op_text(const std::string& name);
std::vector<std::string> suite_names();
std::string suite_text(const std::string& name);
//! Recipes of the cost models' training corpus (ops/corpus/*.json, tuner/corpus.hpp).
std::vector<std::string> corpus_names();
std::string corpus_text(const std::string& name);

//! Where an op's text comes from, to begin its messages: "FILE:" or "library op NAME:".
std::string op_origin(const std::string& op);
//! An op and the text it came from.
struct LoadedOp {
  std::string text;
  ir::OpDef def;
};
//! The op `op` names: a .tile file if it names a file, else a library op; `op_name` picks one of
//! several. A parse error begins with op_origin (then LINE:COLUMN).
LoadedOp load_op(const std::string& op, const std::string& op_name);

}  // namespace tiletune::ops
