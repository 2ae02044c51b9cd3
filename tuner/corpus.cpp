#include "tuner/corpus.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <random>
#include <set>

#include "ir/parse.hpp"
#include "ir/workload.hpp"
#include "models/onnx_import.hpp"
#include "ops/library.hpp"
#include "support/error.hpp"
#include "support/files.hpp"
#include "tuner/random_ops.hpp"

namespace tiletune::tuner {

namespace {

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw_error(ErrorKind::InvalidInput, "corpus recipe " + where + ": " + what);
}

//! A library entry's sizes: each free size log-uniform in its [lo, hi], fixed ones as given,
//! redrawn until the op binds and its arithmetic is within [max_flops / 1000, max_flops].
std::string draw_sizes(std::mt19937_64& rng, const ir::OpDef& def, const nlohmann::json& sizes, double max_flops,
                       const std::string& where) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    ir::Sizes s;
    for (auto& [name, v] : sizes.items()) {
      if (v.is_number_integer()) {
        s[name] = v.get<std::int64_t>();
      } else {
        double lo = std::log(v[0].get<double>()), hi = std::log(v[1].get<double>());
        s[name] = std::llround(std::exp(std::uniform_real_distribution<double>(lo, hi)(rng)));
      }
    }
    try {
      double f = ir::bind(def, s).flops();
      if (f > max_flops || f < max_flops / 1000) continue;
    } catch (const Error&) {
      continue;
    }
    std::string text;
    for (auto& [name, v] : s) text += (text.empty() ? "" : ",") + name + "=" + std::to_string(v);
    return text;
  }
  bad(where, "no sizes in the given ranges bind with at most max_flops of work");
}

//! Refuses a key of `object` that is not among `known`: a misspelt field would otherwise be a
//! default taken silently (or a newer recipe's field that this build does not know).
void check_fields(const nlohmann::json& object, std::initializer_list<const char*> known, const std::string& where,
                  const std::string& in) {
  for (auto& [key, value] : object.items())
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; }))
      bad(where, in + "unknown field \"" + key + "\"");
}

void check_sizes(const nlohmann::json& sizes, const std::string& where) {
  if (!sizes.is_object()) bad(where, "\"sizes\" must map size names to a number or a [lo, hi] range");
  for (auto& [name, v] : sizes.items()) {
    bool range = v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number() && v[0].get<double>() >= 1 &&
                 v[0].get<double>() <= v[1].get<double>();
    if (!range && !(v.is_number_integer() && v.get<std::int64_t>() >= 1))
      bad(where, "size " + name + " must be a positive integer or a [lo, hi] range with 1 <= lo <= hi");
  }
}

//! A recipe that names a `base` (a shipped recipe) is that recipe with its own fields in place
//! of the base's: a draw of another seed is its name, seed and description, not a copy of the
//! base's op list. The base is written out in full (no base of its own), so what a recipe
//! collects is read in two files at most.
nlohmann::json with_base(nlohmann::json recipe, const std::string& where) {
  if (!recipe.contains("base")) return recipe;
  if (!recipe["base"].is_string()) bad(where, "\"base\" must name a shipped recipe");
  const std::string name = recipe["base"];
  std::string text;
  try {
    text = ops::corpus_text(name);
  } catch (const Error& e) {
    bad(where, std::string("\"base\": ") + e.what());
  }
  nlohmann::json out = nlohmann::json::parse(text, nullptr, false);
  if (out.is_discarded() || !out.is_object()) bad(where, "base " + name + " is not a JSON object");
  if (out.contains("base")) bad(where, "base " + name + " has a base of its own; name a recipe written out in full");
  recipe.erase("base");
  for (auto& [key, value] : recipe.items()) out[key] = value;
  return out;
}

}  // namespace

CorpusRecipe parse_recipe(const std::string& text, const std::string& where) {
  CorpusRecipe r;
  r.json = nlohmann::json::parse(text, nullptr, false);
  if (r.json.is_discarded() || !r.json.is_object()) bad(where, "not a JSON object");
  r.json = with_base(std::move(r.json), where);
  const auto& j = r.json;
  // An integer field of `o` (of the recipe, or of a phase: `in` says which), kept as `out`'s
  // default when absent unless `required`.
  auto int_field = [&](const nlohmann::json& o, const char* name, int& out, int lo, const std::string& in = "",
                       bool required = false) {
    if (!o.contains(name) && required) bad(where, in + "needs \"" + name + "\"");
    if (!o.contains(name)) return;
    if (!o[name].is_number_integer() || o[name].get<int>() < lo)
      bad(where, in + "\"" + name + "\" must be an integer >= " + std::to_string(lo));
    out = o[name].get<int>();
  };
  check_fields(j,
               {"name", "version", "description", "seed", "trials", "guided", "phases", "label_sessions", "max_flops",
                "library", "generated", "onnx"},
               where, "");
  if (!j.contains("name") || !j["name"].is_string()) bad(where, "needs a string \"name\"");
  r.name = j["name"];
  int_field(j, "version", r.version, 1);
  int seed = 1;
  int_field(j, "seed", seed, 0);
  r.seed = static_cast<std::uint64_t>(seed);
  // A phase of "phases" gives both fields; the recipe's own are optional (CorpusPhase's defaults).
  auto phase_of = [&](const nlohmann::json& p, const std::string& in, bool both) {
    CorpusPhase phase;
    int_field(p, "trials", phase.trials, 1, in, both);
    int_field(p, "guided", phase.guided, 0, in, both);
    if (phase.guided > phase.trials) bad(where, in + "\"guided\" cannot exceed \"trials\"");
    return phase;
  };
  if (j.contains("phases")) {
    if (j.contains("trials") || j.contains("guided")) bad(where, "give \"phases\" or \"trials\" and \"guided\", not both");
    if (!j["phases"].is_array() || j["phases"].empty()) bad(where, "\"phases\" must be a non-empty array");
    for (auto& p : j["phases"]) {
      std::string in = "phase " + std::to_string(r.phases.size() + 1) + ": ";
      if (!p.is_object()) bad(where, in + "must be {\"trials\": N, \"guided\": G}");
      check_fields(p, {"trials", "guided"}, where, in);
      const CorpusPhase phase = phase_of(p, in, true);
      if (!r.phases.empty()) {
        // Records already there count toward the random configs first: guided ones are only
        // what the phase adds.
        const int adds = phase.trials - r.phases.back().trials;
        if (adds <= 0) bad(where, in + "\"trials\" must exceed the phase before's");
        if (phase.guided > adds)
          bad(where, in + "\"guided\" cannot exceed the records the phase adds (" + std::to_string(adds) + ")");
      }
      r.phases.push_back(phase);
    }
  } else {
    r.phases.push_back(phase_of(j, "", false));
  }
  int_field(j, "label_sessions", r.label_sessions, 1);
  if (j.contains("max_flops")) {
    if (!j["max_flops"].is_number() || j["max_flops"].get<double>() < 1000) bad(where, "\"max_flops\" must be >= 1000");
    r.max_flops = j["max_flops"];
  }
  if (j.contains("library")) {
    if (!j["library"].is_array()) bad(where, "\"library\" must be an array");
    for (auto& e : j["library"]) {
      if (!e.is_object() || !e.contains("op") || !e["op"].is_string())
        bad(where, "each library entry needs a string \"op\"");
      if (!e.contains("count") || !e["count"].is_number_integer() || e["count"].get<int>() < 1)
        bad(where, "library entry " + e["op"].get<std::string>() + " needs a \"count\" >= 1");
      check_fields(e, {"op", "op_name", "count", "sizes"}, where, "library entry " + e["op"].get<std::string>() + ": ");
      if (e.contains("op_name") && !e["op_name"].is_string())
        bad(where, "library entry " + e["op"].get<std::string>() + ": \"op_name\" must be a string");
      check_sizes(e.value("sizes", nlohmann::json::object()), where + ", " + e["op"].get<std::string>());
    }
  }
  if (j.contains("generated")) {
    if (!j["generated"].is_object())
      bad(where, "\"generated\" must be {\"count\": N, \"composite\": C, \"constructs\": S} (any may be left out)");
    check_fields(j["generated"], {"count", "composite", "constructs"}, where, "\"generated\": ");
    int checked = 0;  // corpus_cases reads both from the recipe's JSON, as the other entries
    int_field(j["generated"], "count", checked, 0, "\"generated\": ");
    int_field(j["generated"], "composite", checked, 0, "\"generated\": ");
    int_field(j["generated"], "constructs", checked, 0, "\"generated\": ");
  }
  if (j.contains("onnx") && (!j["onnx"].is_object() || !j["onnx"].value("dir", nlohmann::json()).is_string() ||
                             !j["onnx"].value("models", nlohmann::json()).is_array()))
    bad(where, "\"onnx\" must be {\"dir\": PATH, \"models\": [NAME, ...]}");
  if (j.contains("onnx")) check_fields(j["onnx"], {"dir", "models"}, where, "\"onnx\": ");
  return r;
}

namespace {

//! A library entry's op: a library op by name, or the op of a .tile file (relative to the
//! recipe's folder), "op_name" choosing one of several.
struct EntryOp {
  ops::LoadedOp op;
  std::string source;
};
EntryOp entry_op(const CorpusRecipe& recipe, const nlohmann::json& entry) {
  const std::string op = entry["op"];
  const std::string ext = ".tile";
  if (op.size() <= ext.size() || op.compare(op.size() - ext.size(), ext.size(), ext) != 0) {
    std::string text = ops::op_text(op);  // the library's, even where a file of that name exists
    return {{text, ir::parse_op(text)}, "library"};
  }
  std::filesystem::path path = op;
  if (path.is_relative() && !recipe.dir.empty()) path = std::filesystem::path(recipe.dir) / path;
  if (!is_file(path.string()))
    throw_error(ErrorKind::NotFound, "corpus recipe " + recipe.name + ": library entry " + op + ": no file " +
                                         path.string() + " (a .tile path is relative to the recipe's folder)");
  return {ops::load_op(path.string(), entry.value("op_name", "")), "file:" + op};
}

}  // namespace

std::vector<CorpusCase> corpus_cases(const CorpusRecipe& recipe, std::vector<std::string>* notes) {
  std::vector<CorpusCase> out;
  std::set<std::string> keys;
  auto add = [&](CorpusCase c) {
    c.workload = ir::bind(ir::select_op(ir::parse_ops(c.op_text), c.op_name, c.source), ir::parse_sizes(c.sizes));
    if (keys.insert(c.workload.key).second) out.push_back(std::move(c));
  };
  const auto& j = recipe.json;
  std::mt19937_64 rng(recipe.seed);
  for (auto& e : j.value("library", nlohmann::json::array())) {
    const auto [op, source] = entry_op(recipe, e);
    for (int i = 0; i < e["count"].get<int>(); ++i)
      add({op.text, op.def.name,
           draw_sizes(rng, op.def, e.value("sizes", nlohmann::json::object()), recipe.max_flops, e["op"]), source, {}});
  }
  const auto generated = j.value("generated", nlohmann::json::object());
  using Draw = GeneratedOp (*)(std::uint64_t, int, double);
  for (auto [field, draw] : {std::pair<const char*, Draw>{"count", random_op},
                             {"composite", random_composite_op},
                             {"constructs", random_construct_op}})
    for (int i = 0; i < generated.value(field, 0); ++i) {
      GeneratedOp g = draw(recipe.seed, i, recipe.max_flops);
      add({g.text, g.name, g.sizes, "generated:" + g.kind, {}});
    }
  if (j.contains("onnx")) {
    std::string dir = j["onnx"]["dir"];
    for (auto& name : j["onnx"]["models"]) {
      std::string path = dir + "/" + name.get<std::string>() + "/model.onnx";
      if (!std::filesystem::exists(path)) {
        if (notes) notes->push_back("left out " + path + ": not found (Debian's libonnx-testdata has it)");
        continue;
      }
      try {
        for (auto& t : models::import_onnx(path, {}).tasks) {
          ir::OpDef def = ir::parse_op(t.op_text);
          double f = ir::bind(def, ir::parse_sizes(t.sizes)).flops();
          if (f > recipe.max_flops) continue;
          add({t.op_text, def.name, t.sizes, "onnx:" + name.get<std::string>(), {}});
        }
      } catch (const Error& e) {
        if (notes) notes->push_back("left out " + path + ": " + e.what());
      }
    }
  }
  return out;
}

}  // namespace tiletune::tuner
