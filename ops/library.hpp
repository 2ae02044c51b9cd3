// ops/library.hpp
#pragma once
#include <string>
#include <vector>

namespace tiletune::ops {

//! The operator library (ops/*.tile) and suites (ops/suites/*.json), compiled into tiletune
//! so that the binary needs no data files.
std::vector<std::string> op_names();
//! Text of the library op `name`; Error(NotFound) listing the names if there is none.
std::string op_text(const std::string& name);
std::vector<std::string> suite_names();
std::string suite_text(const std::string& name);

}  // namespace tiletune::ops
