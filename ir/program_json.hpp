// ir/program_json.hpp
#pragma once
#include <string>

#include "ir/loop_nest.hpp"

namespace tiletune::ir {

//! A lowered workload as the JSON document backend plug-ins emit code from (see
//! include/tiletune/backend_plugin.h and the README's "Add a backend"). Size symbols in
//! expressions are replaced by their values, so a plug-in needs no size table.
std::string program_to_json(const Workload& w, const LoopNest& nest, const std::string& config_json);

}  // namespace tiletune::ir
