#include "ir/lexer.hpp"

#include <cctype>
#include <cstdio>

#include "support/error.hpp"

namespace tiletune::ir::detail {

void fail_at(SourceLoc loc, const std::string& message) {
  throw_error(ErrorKind::InvalidInput, std::to_string(loc.line) + ":" + std::to_string(loc.column) + ": " + message);
}

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace

std::vector<Token> lex(const std::string& text) {
  std::vector<Token> out;
  int line = 1, col = 1;
  size_t i = 0;
  auto advance = [&](size_t n) {
    for (size_t j = 0; j < n && i < text.size(); ++j, ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
  };
  while (i < text.size()) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      advance(1);
      continue;
    }
    if (c == '#' || (c == '/' && i + 1 < text.size() && text[i + 1] == '/')) {
      while (i < text.size() && text[i] != '\n') advance(1);
      continue;
    }
    Token t;
    t.loc = {line, col};
    size_t start = i;
    if (ident_start(c)) {
      while (i < text.size() && ident_char(text[i])) advance(1);
      t.kind = Tok::Ident;
    } else if (digit(c) || (c == '.' && i + 1 < text.size() && digit(text[i + 1]))) {
      bool is_float = false;
      while (i < text.size() && digit(text[i])) advance(1);
      if (i < text.size() && text[i] == '.') {
        is_float = true;
        advance(1);
        while (i < text.size() && digit(text[i])) advance(1);
      }
      if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        size_t j = i + 1;
        if (j < text.size() && (text[j] == '+' || text[j] == '-')) ++j;
        if (j < text.size() && digit(text[j])) {
          is_float = true;
          advance(j - i);
          while (i < text.size() && digit(text[i])) advance(1);
        }
      }
      if (i < text.size() && ident_char(text[i]))
        fail_at({line, col}, "malformed number '" + text.substr(start, i - start + 1) + "'");
      t.kind = is_float ? Tok::Float : Tok::Int;
    } else {
      static const char* two[] = {"->", "+=", "*=", "<=", ">=", "==", "!="};
      t.kind = Tok::Punct;
      bool matched = false;
      for (const char* p : two) {
        if (text.compare(i, 2, p) == 0) {
          advance(2);
          matched = true;
          break;
        }
      }
      if (!matched) {
        if (std::string("()[]{}:,+-*/=<>;").find(c) == std::string::npos) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(c));
          std::string shown =
              std::isprint(static_cast<unsigned char>(c)) ? std::string(1, c) : std::string("byte ") + hex;
          fail_at(t.loc,
                  "unexpected character '" + shown + "': names are plain ASCII identifiers [A-Za-z_][A-Za-z0-9_]*");
        }
        advance(1);
      }
    }
    t.text = text.substr(start, i - start);
    out.push_back(std::move(t));
  }
  Token end;
  end.kind = Tok::End;
  end.loc = {line, col};
  out.push_back(end);
  return out;
}

}  // namespace tiletune::ir::detail
