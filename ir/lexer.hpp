// ir/lexer.hpp — internal to ir/
#pragma once
#include <string>
#include <vector>

#include "ir/op.hpp"

namespace tiletune::ir::detail {

enum class Tok { Ident, Int, Float, Punct, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;
  SourceLoc loc;
};

//! Splits op text into tokens; `#` and `//` start comments. Throws Error(InvalidInput) with
//! line:column on a character that cannot start a token.
std::vector<Token> lex(const std::string& text);

[[noreturn]] void fail_at(SourceLoc loc, const std::string& message);

}  // namespace tiletune::ir::detail
