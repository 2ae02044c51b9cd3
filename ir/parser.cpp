// The recursive-descent parser of the tile-op language. Grammar:
//   file   := op+
//   op     := 'op' NAME '(' decl (',' decl)* ')' '->' (decl | '(' decl (',' decl)* ')') '{' stmt* '}'
//   decl   := NAME ':' 'f32' '[' size (',' size)* ']'
//   stmt   := NAME '[' NAME (',' NAME)* ']' ('=' | '+=' | '*=' | 'max=' | 'min=') expr ';'?
//   expr   := sum (('<' | '<=' | '>' | '>=' | '==' | '!=') sum)?
//   sum    := prod (('+' | '-') prod)*        prod := unary (('*' | '/') unary)*
//   unary  := '-' unary | NUMBER | SIZE | NAME '[' index (',' index)* ']' | NAME '(' args ')' | '(' expr ')'
//   index  := affine combination of index names and integers (`2*y + r - 1`)
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

#include "ir/lexer.hpp"
#include "ir/parse.hpp"
#include "support/error.hpp"

namespace tiletune::ir {

void check_op(OpDef& op);  // check.cpp

namespace {

using detail::fail_at;
using detail::Tok;
using detail::Token;

const std::set<std::string>& reserved_words() {
  static const std::set<std::string> words = {"op",  "f32",     "bf16", "f16", "i32",  "i8",   "u8",
                                              "max", "min",     "exp",  "log", "sqrt", "tanh", "select",
                                              "abs", "sigmoid", "erf",  "pow", "round"};
  return words;
}

class Parser {
 public:
  explicit Parser(const std::string& text) : toks_(detail::lex(text)) {}

  std::vector<OpDef> file() {
    std::vector<OpDef> ops;
    while (peek().kind != Tok::End) ops.push_back(op());
    if (ops.empty()) fail_at(peek().loc, "expected 'op', found end of text");
    return ops;
  }

 private:
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;  // nesting of parentheses and unary minus
  int nodes_ = 0;  // expression nodes of the current statement
  std::set<std::string> sizes_;  // the current op's size symbols: in an index, a size, not an index name

  // Limits that keep hostile text from exhausting the stack (every pass over an expression
  // recurses) or overflowing index arithmetic.
  static constexpr int kMaxDepth = 200;
  static constexpr int kMaxNodes = 20000;
  static constexpr std::int64_t kMaxInt = std::int64_t(1) << 31;

  struct DepthGuard {
    Parser& p;
    DepthGuard(Parser& parser, SourceLoc loc) : p(parser) {
      if (++p.depth_ > kMaxDepth)
        fail_at(loc, "expression nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~DepthGuard() { --p.depth_; }
  };

  std::int64_t integer(const Token& t) {
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || end != t.text.data() + t.text.size() || v > kMaxInt)
      fail_at(t.loc, "integer " + t.text.substr(0, 24) + " is out of range (at most 2^31)");
    return v;
  }
  double real(const Token& t) {
    double v = std::strtod(t.text.c_str(), nullptr);
    if (!std::isfinite(v) || std::fabs(v) > 3.4e38)
      fail_at(t.loc, "number " + t.text.substr(0, 24) + " is out of the f32 range");
    return v;
  }

  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  static std::string describe(const Token& t) { return t.kind == Tok::End ? "end of text" : "'" + t.text + "'"; }
  bool at(const char* text) const { return peek().kind != Tok::End && peek().text == text; }
  bool accept(const char* text) {
    if (!at(text)) return false;
    ++pos_;
    return true;
  }
  const Token& expect(const char* text, const std::string& what) {
    if (!at(text)) fail_at(peek().loc, "expected " + what + ", found " + describe(peek()));
    return toks_[pos_++];
  }
  std::string name(const char* what) {
    const Token& t = peek();
    if (t.kind != Tok::Ident) fail_at(t.loc, std::string("expected ") + what + ", found " + describe(t));
    if (t.text.size() > 64) fail_at(t.loc, "name '" + t.text.substr(0, 20) + "...' is longer than 64 characters");
    std::string lower = t.text.substr(0, 3);
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (t.text[0] == '_' || lower == "tt_")
      fail_at(t.loc, "'" + t.text + "' is not a plain name: names may not start with '_' or 'tt_'");
    if (reserved_words().count(t.text)) fail_at(t.loc, "'" + t.text + "' is a reserved word and cannot name " + what);
    ++pos_;
    return t.text;
  }

  OpDef op() {
    OpDef op;
    op.loc = peek().loc;
    expect("op", "'op'");
    op.name = name("the op's name");
    expect("(", "'(' after the op name");
    do op.inputs.push_back(decl());
    while (accept(","));
    expect(")", "')' or ',' after an input");
    expect("->", "'->' before the outputs");
    if (accept("(")) {
      do op.outputs.push_back(decl());
      while (accept(","));
      expect(")", "')' or ',' after an output");
    } else {
      op.outputs.push_back(decl());
    }
    for (auto& out : op.outputs)
      if (out.pad)
        fail_at(out.loc, "output '" + out.name + "' cannot declare 'pad': only an input's reads can fall outside it");
      else if (out.constant)
        fail_at(out.loc, "output '" + out.name + "' cannot be 'const': only an input stays the same between calls");
    sizes_ = size_symbols(op);
    expect("{", "'{' to open the op body");
    while (!at("}")) {
      if (peek().kind == Tok::End) fail_at(peek().loc, "expected '}' to close op '" + op.name + "'");
      op.stmts.push_back(stmt());
      accept(";");
    }
    expect("}", "'}'");
    if (op.stmts.empty()) fail_at(op.loc, "op '" + op.name + "' has no statements");
    check_op(op);
    return op;
  }

  TensorDecl decl() {
    TensorDecl d;
    d.loc = peek().loc;
    d.name = name("a tensor name");
    expect(":", "':' after the tensor name");
    if (peek().kind != Tok::Ident || !parse_dtype(peek().text, d.dtype))
      fail_at(peek().loc, "expected an element type (f32, bf16, f16, i32, i8 or u8), found " + describe(peek()));
    ++pos_;
    expect("[", "'[' to open the shape");
    do d.dims.push_back(size_sum());
    while (accept(","));
    expect("]", "']' or ',' in the shape");
    // Attributes, each at most once, in any order: `pad VALUE`, `const`.
    for (;;) {
      if (peek().kind == Tok::Ident && peek().text == "pad" && !d.pad) {
        ++pos_;
        d.pad = pad_value();
      } else if (peek().kind == Tok::Ident && peek().text == "const" && !d.constant) {
        ++pos_;
        d.constant = true;
      } else {
        return d;
      }
    }
  }

  //! A number or `inf`, with an optional sign: what an out-of-range read of an input yields.
  double pad_value() {
    bool negative = accept("-");
    const Token& t = peek();
    double v = 0;
    if (t.kind == Tok::Int || t.kind == Tok::Float)
      v = real(t);
    else if (t.kind == Tok::Ident && t.text == "inf")
      v = INFINITY;
    else
      fail_at(t.loc, "expected the pad value (a number, inf or -inf) after 'pad', found " + describe(t));
    ++pos_;
    return negative ? -v : v;
  }

  SizeExpr size_sum() {
    SizeExpr lhs = size_prod();
    while (at("+") || at("-")) {
      SizeExpr e;
      e.kind = toks_[pos_++].text == "+" ? SizeExpr::Kind::Add : SizeExpr::Kind::Sub;
      e.args = {std::move(lhs), size_prod()};
      lhs = std::move(e);
    }
    return lhs;
  }
  SizeExpr size_prod() {
    SizeExpr lhs = size_atom();
    while (at("*") || at("/")) {
      SizeExpr e;
      e.kind = toks_[pos_++].text == "*" ? SizeExpr::Kind::Mul : SizeExpr::Kind::Div;
      e.args = {std::move(lhs), size_atom()};
      lhs = std::move(e);
    }
    return lhs;
  }
  SizeExpr size_atom() {
    SizeExpr e;
    if (peek().kind == Tok::Int) {
      e.value = integer(toks_[pos_++]);
    } else if (peek().kind == Tok::Ident) {
      e.kind = SizeExpr::Kind::Symbol;
      e.symbol = name("a size name");
    } else if (at("(")) {
      DepthGuard guard(*this, peek().loc);
      ++pos_;
      e = size_sum();
      expect(")", "')' in a size expression");
    } else {
      fail_at(peek().loc, "expected a size (a name such as N or an integer), found " + describe(peek()));
    }
    return e;
  }

  Stmt stmt() {
    nodes_ = 0;
    Stmt s;
    s.loc = peek().loc;
    s.tensor = name("a tensor name at the start of a statement");
    expect("[", "'[' after the assigned tensor");
    do {
      const Token& t = peek();
      std::string v = name("an index name on the left-hand side");
      if (!at(",") && !at("]"))
        fail_at(t.loc, "left-hand indices must be plain index names; found an expression after '" + v + "'");
      s.lhs_vars.push_back(v);
    } while (accept(","));
    expect("]", "']' or ',' after a left-hand index");
    if (accept("=")) {
      s.combine = Combine::Assign;
    } else if (accept("+=")) {
      s.combine = Combine::Add;
    } else if (accept("*=")) {
      s.combine = Combine::Mul;
    } else if ((at("max") || at("min")) && peek(1).text == "=") {
      s.combine = toks_[pos_].text == "max" ? Combine::Max : Combine::Min;
      pos_ += 2;
    } else {
      fail_at(peek().loc, "expected '=', '+=', '*=', 'max=' or 'min=', found " + describe(peek()));
    }
    s.rhs = expr();
    // A range clause, told from a next statement that assigns a tensor named `where` by `where r <`.
    if (at("where") && peek(1).kind == Tok::Ident && peek(2).text == "<") {
      ++pos_;
      do {
        Stmt::Range r;
        r.loc = peek().loc;
        r.var = name("an index name in 'where'");
        expect("<", "'<' after the index of a 'where' range");
        r.extent = size_sum();
        s.ranges.push_back(std::move(r));
      } while (accept(","));
    }
    return s;
  }

  Expr binary(Expr::Kind kind, Expr lhs, Expr rhs, SourceLoc loc) {
    if (++nodes_ > kMaxNodes) fail_at(loc, "statement has more than " + std::to_string(kMaxNodes) + " operations");
    Expr e;
    e.kind = kind;
    e.loc = loc;
    e.args.push_back(std::move(lhs));
    e.args.push_back(std::move(rhs));
    return e;
  }

  Expr expr() {
    Expr lhs = sum();
    static const std::pair<const char*, Expr::Kind> cmps[] = {{"<", Expr::Kind::Lt},  {"<=", Expr::Kind::Le},
                                                              {">", Expr::Kind::Gt},  {">=", Expr::Kind::Ge},
                                                              {"==", Expr::Kind::Eq}, {"!=", Expr::Kind::Ne}};
    for (auto& [tok, kind] : cmps) {
      if (at(tok)) {
        SourceLoc loc = toks_[pos_++].loc;
        return binary(kind, std::move(lhs), sum(), loc);
      }
    }
    return lhs;
  }
  Expr sum() {
    Expr lhs = prod();
    while (at("+") || at("-")) {
      const Token& t = toks_[pos_++];
      lhs = binary(t.text == "+" ? Expr::Kind::Add : Expr::Kind::Sub, std::move(lhs), prod(), t.loc);
    }
    return lhs;
  }
  Expr prod() {
    Expr lhs = unary();
    while (at("*") || at("/")) {
      const Token& t = toks_[pos_++];
      lhs = binary(t.text == "*" ? Expr::Kind::Mul : Expr::Kind::Div, std::move(lhs), unary(), t.loc);
    }
    return lhs;
  }
  Expr unary() {
    Expr e;
    e.loc = peek().loc;
    DepthGuard guard(*this, e.loc);
    if (accept("-")) {
      e.kind = Expr::Kind::Neg;
      e.args.push_back(unary());
      return e;
    }
    if (peek().kind == Tok::Int || peek().kind == Tok::Float) {
      e.value = real(toks_[pos_++]);
      return e;
    }
    if (accept("(")) {
      e = expr();
      expect(")", "')' to close '('");
      return e;
    }
    if (peek().kind == Tok::Ident && peek(1).text == "(") {
      e.kind = Expr::Kind::Call;
      e.name = toks_[pos_++].text;
      if (builtin_arity(e.name) < 0) fail_at(e.loc, "unknown function '" + e.name + "'");
      expect("(", "'('");
      if (!at(")")) {
        do e.args.push_back(expr());
        while (accept(","));
      }
      expect(")", "')' or ',' in the arguments");
      if (static_cast<int>(e.args.size()) != builtin_arity(e.name))
        fail_at(e.loc, "'" + e.name + "' takes " + std::to_string(builtin_arity(e.name)) + " argument(s), got " +
                           std::to_string(e.args.size()));
      return e;
    }
    if (peek().kind == Tok::Ident && peek(1).text != "[") {
      e.kind = Expr::Kind::Size;  // a size symbol used as a number, like D in `s[n] / D`
      e.name = name("a size name");
      return e;
    }
    if (peek().kind == Tok::Ident) {
      e.kind = Expr::Kind::Access;
      e.name = name("a tensor name");
      expect("[", "'['");
      do e.indices.push_back(index());
      while (accept(","));
      expect("]", "']' or ',' in the indices");
      return e;
    }
    fail_at(peek().loc, "expected an expression (a number, a tensor access, a call or '('), found " + describe(peek()));
  }

  IndexExpr index() {
    IndexExpr ix;
    bool negate = accept("-");
    while (true) {
      std::int64_t coeff = negate ? -1 : 1;
      std::string var;
      SourceLoc loc = peek().loc;
      if (peek().kind == Tok::Int) {
        std::int64_t n = integer(toks_[pos_++]);
        if (accept("*")) {
          coeff *= n;
          var = name("an index name after '*'");
        } else {
          ix.constant += coeff * n;
        }
      } else if (peek().kind == Tok::Ident) {
        var = name("an index name");
        if (accept("*")) {
          if (peek().kind != Tok::Int)
            fail_at(peek().loc,
                    "index expressions must be affine: expected an integer after '*', found " + describe(peek()));
          coeff *= integer(toks_[pos_++]);
        }
      } else {
        fail_at(loc, "expected an index (a name, an integer or 'a*name'), found " + describe(peek()));
      }
      if (!var.empty()) {
        auto& terms = sizes_.count(var) ? ix.sizes : ix.terms;
        bool merged = false;
        for (auto& t : terms)
          if (t.var == var) {
            t.coeff += coeff;
            merged = true;
          }
        if (!merged) terms.push_back({var, coeff});
      }
      if (at("+")) {
        ++pos_;
        negate = false;
      } else if (at("-")) {
        ++pos_;
        negate = true;
      } else {
        break;
      }
    }
    for (auto* terms : {&ix.terms, &ix.sizes}) {
      std::vector<IndexExpr::Term> kept;
      for (auto& t : *terms)
        if (t.coeff != 0) kept.push_back(t);
      for (auto& t : kept)
        if (t.coeff > kMaxInt || t.coeff < -kMaxInt) fail_at(peek().loc, "index coefficient out of range (at most 2^31)");
      *terms = kept;
    }
    if (ix.constant > kMaxInt || ix.constant < -kMaxInt)
      fail_at(peek().loc, "index constant out of range (at most 2^31)");
    return ix;
  }
};

}  // namespace

std::vector<OpDef> parse_ops(const std::string& text) {
  std::vector<OpDef> ops = Parser(text).file();
  std::set<std::string> names;
  for (auto& op : ops)
    if (!names.insert(op.name).second) detail::fail_at(op.loc, "op '" + op.name + "' is defined twice");
  return ops;
}

OpDef select_op(std::vector<OpDef> defs, const std::string& op_name, const std::string& where) {
  if (!op_name.empty()) {
    for (auto& d : defs)
      if (d.name == op_name) return std::move(d);
    throw_error(ErrorKind::NotFound, "no op named '" + op_name + "' in " + where);
  }
  if (defs.size() != 1) {
    std::string names;
    for (auto& d : defs) names += (names.empty() ? "" : ", ") + d.name;
    throw_error(ErrorKind::InvalidInput,
                where + " holds several ops (" + names + "): choose one by name (--op-name, \"op_name\")");
  }
  return std::move(defs.front());
}

OpDef parse_op(const std::string& text) {
  auto ops = parse_ops(text);
  if (ops.size() != 1) detail::fail_at(ops[1].loc, "expected exactly one op, found " + std::to_string(ops.size()));
  return std::move(ops[0]);
}

}  // namespace tiletune::ir
