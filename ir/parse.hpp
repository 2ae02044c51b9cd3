// ir/parse.hpp
#pragma once
#include <string>
#include <vector>

#include "ir/op.hpp"

namespace tiletune::ir {

//! Parses and checks op text holding one or more ops. Every error is an
//! Error(InvalidInput) whose message starts with "line:column:" and says what was expected.
//! Checking covers names, ranks, index ranges and reductions; sizes are checked when bound.
std::vector<OpDef> parse_ops(const std::string& text);

//! Parses text that must hold exactly one op.
OpDef parse_op(const std::string& text);

}  // namespace tiletune::ir
