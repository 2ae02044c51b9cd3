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

//! The op named op_name among defs, or the only one when op_name is empty. Error(NotFound) for
//! an unknown name, Error(InvalidInput) when several ops leave the choice open; `where` names
//! the text in messages.
OpDef select_op(std::vector<OpDef> defs, const std::string& op_name, const std::string& where);

//! Parses text that must hold exactly one op.
OpDef parse_op(const std::string& text);

}  // namespace tiletune::ir
