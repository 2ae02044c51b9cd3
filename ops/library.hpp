// ops/library.hpp
#pragma once
#include <string>
#include <vector>

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

}  // namespace tiletune::ops
