// The template parser (see parser.h): jinja2's grammar and operator
// precedence, for the statements and expressions chat templates use.
#include "parser.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>

namespace tern::jinja {
namespace {

using T = Token::Type;

class Parser {
 public:
  Parser(std::vector<Token> t, const Options& o) : t_(std::move(t)), opt_(o) {}

  Program run() {
    Program p;
    std::string end;
    p.body = body({}, &end);
    return p;
  }

 private:
  // --- tokens ---
  const Token& cur() const { return t_[p_]; }
  const Token& next() { return t_[p_ < t_.size() - 1 ? p_++ : p_]; }
  bool is_op(std::string_view op) const { return cur().type == T::Op && cur().value == op; }
  bool is_name(std::string_view n) const { return cur().type == T::Name && cur().value == n; }
  bool skip_op(std::string_view op) { return is_op(op) ? (next(), true) : false; }
  bool skip_name(std::string_view n) { return is_name(n) ? (next(), true) : false; }

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("template syntax error at line " + std::to_string(cur().line) + ": " + what);
  }
  std::string describe() const {
    switch (cur().type) {
      case T::Eof:
        return "end of template";
      case T::BlockEnd:
        return "end of statement block";
      case T::VarEnd:
        return "end of print statement";
      default:
        return "'" + cur().value + "'";
    }
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', got " + describe());
  }
  void expect(T type, std::string_view what) {
    if (cur().type != type) fail("expected " + std::string(what) + ", got " + describe());
    next();
  }
  std::string expect_name() {
    if (cur().type != T::Name) fail("expected a name, got " + describe());
    return next().value;
  }

  // Guards recursion: nesting deeper than max_depth is refused, never a stack overflow.
  struct Depth {
    Parser& p;
    explicit Depth(Parser& parser) : p(parser) {
      if (++p.depth_ > p.opt_.max_depth)
        p.fail("nesting deeper than " + std::to_string(p.opt_.max_depth));
    }
    ~Depth() { --p.depth_; }
  };

  // Records e's height; a tree taller than 4 * max_depth (a long chain such as
  // a+a+a+..., or x.y.y.y...) is refused so evaluating and freeing it stay shallow.
  ExprPtr fin(ExprPtr e) {
    int h = 0;
    for (const ExprPtr& k : e->kids)
      if (k) h = std::max(h, k->height);
    for (const ExprPtr& k : e->args.positional) h = std::max(h, k->height);
    for (const auto& [n, k] : e->args.keyword) h = std::max(h, k->height);
    e->height = h + 1;
    if (e->height > 4 * opt_.max_depth) fail("expression nested too deeply");
    return e;
  }

  ExprPtr make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // --- statements ---
  // Parses until one of `ends` opens a block tag; stores which in *end (the
  // tag's name consumed, the rest of the tag left). Empty `ends`: until EOF.
  Body body(std::initializer_list<std::string_view> ends, std::string* end) {
    Depth d(*this);
    Body out;
    for (;;) {
      const Token& tok = cur();
      if (tok.type == T::Eof) {
        if (ends.size() == 0) return out;
        fail("unexpected end of template: missing '" + std::string(*(ends.end() - 1)) + "'");
      }
      if (tok.type == T::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = tok.line;
        s->text = next().value;
        out.push_back(std::move(s));
        continue;
      }
      if (tok.type == T::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output;
        s->line = tok.line;
        s->expr = tuple(true);
        expect(T::VarEnd, "'}}'");
        out.push_back(std::move(s));
        continue;
      }
      if (tok.type != T::BlockBegin) fail("unexpected " + describe());
      next();
      if (cur().type != T::Name) fail("expected a statement name, got " + describe());
      for (std::string_view e : ends) {
        if (is_name(e)) {
          *end = next().value;
          return out;
        }
      }
      out.push_back(statement());
    }
  }

  StmtPtr statement() {
    const int line = cur().line;
    const std::string kw = next().value;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (kw == "if") return if_stmt(std::move(s));
    if (kw == "for") return for_stmt(std::move(s));
    if (kw == "set") return set_stmt(std::move(s));
    if (kw == "macro") return macro_stmt(std::move(s));
    if (kw == "call") return call_stmt(std::move(s));
    if (kw == "filter") {
      s->kind = Stmt::Kind::FilterBlock;
      s->expr = filter_chain(nullptr);
      expect(T::BlockEnd, "'%}'");
      s->bodies.push_back(body_until("endfilter"));
      return s;
    }
    if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect(T::BlockEnd, "'%}'");
      return s;
    }
    if (kw == "generation") {
      s->kind = Stmt::Kind::Scope;
      expect(T::BlockEnd, "'%}'");
      s->bodies.push_back(body_until("endgeneration"));
      return s;
    }
    throw Error("template line " + std::to_string(line) + ": unsupported tag '" + kw + "'");
  }

  Body body_until(std::string_view end_tag) {
    std::string end;
    Body b = body({end_tag}, &end);
    expect(T::BlockEnd, "'%}'");
    return b;
  }

  StmtPtr if_stmt(StmtPtr s) {
    s->kind = Stmt::Kind::If;
    for (;;) {
      s->conds.push_back(tuple(true));
      expect(T::BlockEnd, "'%}'");
      std::string end;
      s->bodies.push_back(body({"elif", "else", "endif"}, &end));
      if (end == "elif") continue;
      if (end == "else") {
        expect(T::BlockEnd, "'%}'");
        s->bodies.push_back(body_until("endif"));
      } else {
        expect(T::BlockEnd, "'%}'");
      }
      return s;
    }
  }

  std::vector<std::string> name_targets() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      names.push_back(expect_name());
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr for_stmt(StmtPtr s) {
    s->kind = Stmt::Kind::For;
    s->targets = name_targets();
    if (!skip_name("in")) fail("expected 'in' in for loop, got " + describe());
    s->expr = tuple(false);
    if (skip_name("if")) s->cond = expression(true);
    if (is_name("recursive")) fail("recursive for loops are not supported");
    expect(T::BlockEnd, "'%}'");
    std::string end;
    s->bodies.push_back(body({"else", "endfor"}, &end));
    expect(T::BlockEnd, "'%}'");
    if (end == "else") s->bodies.push_back(body_until("endfor"));
    return s;
  }

  StmtPtr set_stmt(StmtPtr s) {
    s->kind = Stmt::Kind::Set;
    const int line = cur().line;
    const std::string first = expect_name();
    if (skip_op(".")) {
      auto t = make(Expr::Kind::Attr, line);
      t->kids.push_back(make(Expr::Kind::Name, line));
      t->kids[0]->name = first;
      t->name = expect_name();
      s->target = std::move(t);
    } else {
      s->targets.push_back(first);
      while (skip_op(",")) s->targets.push_back(expect_name());
    }
    if (skip_op("=")) {
      s->expr = tuple(true);
      expect(T::BlockEnd, "'%}'");
      return s;
    }
    if (s->target || s->targets.size() != 1) fail("a block set needs one name");
    s->kind = Stmt::Kind::SetBlock;
    if (skip_op("|")) s->expr = filter_chain(nullptr);
    expect(T::BlockEnd, "'%}'");
    s->bodies.push_back(body_until("endset"));
    return s;
  }

  std::vector<Param> params() {
    std::vector<Param> ps;
    expect_op("(");
    while (!skip_op(")")) {
      if (!ps.empty()) expect_op(",");
      if (skip_op(")")) break;
      Param p{expect_name(), nullptr};
      if (skip_op("=")) p.default_value = expression(true);
      ps.push_back(std::move(p));
    }
    return ps;
  }

  StmtPtr macro_stmt(StmtPtr s) {
    s->kind = Stmt::Kind::Macro;
    s->name = expect_name();
    s->params = params();
    expect(T::BlockEnd, "'%}'");
    s->bodies.push_back(body_until("endmacro"));
    return s;
  }

  StmtPtr call_stmt(StmtPtr s) {
    s->kind = Stmt::Kind::CallBlock;
    if (is_op("(")) s->params = params();
    s->expr = expression(true);
    if (s->expr->kind != Expr::Kind::Call) fail("expected a macro call in 'call' block");
    expect(T::BlockEnd, "'%}'");
    s->bodies.push_back(body_until("endcall"));
    return s;
  }

  // --- expressions ---
  // An expression, or several separated by commas (a tuple).
  ExprPtr tuple(bool condexpr) {
    const int line = cur().line;
    ExprPtr first = expression(condexpr);
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::Tuple, line);
    t->kids.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().type == T::BlockEnd || cur().type == T::VarEnd) break;
      t->kids.push_back(expression(condexpr));
    }
    return t;
  }

  ExprPtr expression(bool condexpr) {
    Depth d(*this);
    ExprPtr e = or_expr();
    while (condexpr && is_name("if")) {
      const int line = next().line;
      auto c = make(Expr::Kind::Cond, line);
      c->kids.push_back(or_expr());
      c->kids.push_back(std::move(e));
      c->kids.push_back(skip_name("else") ? expression(true) : nullptr);
      e = fin(std::move(c));
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b, int line) {
    auto e = make(Expr::Kind::Binary, line);
    e->name = std::move(op);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return fin(std::move(e));
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) e = binary("or", std::move(e), (next(), and_expr()), cur().line);
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) e = binary("and", std::move(e), (next(), not_expr()), cur().line);
    return e;
  }
  ExprPtr not_expr() {
    Depth d(*this);
    if (!is_name("not")) return compare();
    auto u = make(Expr::Kind::Unary, next().line);
    u->name = "not";
    u->kids.push_back(not_expr());
    return u;
  }

  ExprPtr compare() {
    const int line = cur().line;
    ExprPtr first = math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> kids;
    for (;;) {
      if (cur().type == T::Op &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
           cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
        ops.push_back(next().value);
      } else if (is_name("in")) {
        ops.push_back(next().value);
      } else if (is_name("not") && t_[p_ + 1].type == T::Name && t_[p_ + 1].value == "in") {
        next();
        next();
        ops.push_back("not in");
      } else {
        break;
      }
      kids.push_back(math1());
    }
    if (ops.empty()) return first;
    auto c = make(Expr::Kind::Compare, line);
    c->kids.push_back(std::move(first));
    for (auto& k : kids) c->kids.push_back(std::move(k));
    c->ops = std::move(ops);
    return fin(std::move(c));
  }

  template <typename Sub>
  ExprPtr left_assoc(std::initializer_list<std::string_view> ops, Sub sub) {
    ExprPtr e = (this->*sub)();
    for (;;) {
      bool matched = false;
      for (std::string_view op : ops) {
        if (!is_op(op)) continue;
        const int line = next().line;
        e = binary(std::string(op), std::move(e), (this->*sub)(), line);
        matched = true;
        break;
      }
      if (!matched) return e;
    }
  }
  ExprPtr math1() { return left_assoc({"+", "-"}, &Parser::concat); }
  ExprPtr concat() { return left_assoc({"~"}, &Parser::math2); }
  ExprPtr math2() { return left_assoc({"*", "/", "//", "%"}, &Parser::pow); }
  ExprPtr pow() { return left_assoc({"**"}, &Parser::unary_filtered); }
  ExprPtr unary_filtered() { return unary(true); }

  ExprPtr unary(bool with_filter) {
    Depth d(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = make(Expr::Kind::Unary, cur().line);
      e->name = next().value;
      e->kids.push_back(unary(false));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    return with_filter ? filter_expr(std::move(e)) : std::move(e);
  }

  ExprPtr primary() {
    const Token& tok = cur();
    const int line = tok.line;
    auto lit = [&](Value v) {
      auto e = make(Expr::Kind::Literal, line);
      e->literal = std::move(v);
      return e;
    };
    switch (tok.type) {
      case T::Name: {
        const std::string n = next().value;
        if (n == "true" || n == "True") return lit(Value(true));
        if (n == "false" || n == "False") return lit(Value(false));
        if (n == "none" || n == "None") return lit(Value::none());
        auto e = make(Expr::Kind::Name, line);
        e->name = n;
        return e;
      }
      case T::String: {
        std::string s = next().value;
        while (cur().type == T::String) s += next().value;
        return lit(Value(std::move(s)));
      }
      case T::Int: {
        int64_t v = 0;
        const std::string& s = next().value;
        if (std::from_chars(s.data(), s.data() + s.size(), v).ec != std::errc())
          fail("integer literal out of range");
        return lit(Value(v));
      }
      case T::Float:
        return lit(
            Value(std::strtod(next().value.c_str(), nullptr)));  // 1e999 is inf, as in Python
      case T::Op:
        if (skip_op("(")) {
          if (skip_op(")")) return make(Expr::Kind::Tuple, line);
          ExprPtr e = tuple(true);
          if (e->kind != Expr::Kind::Tuple && is_op(",")) next();
          expect_op(")");
          return e;
        }
        if (skip_op("[")) return sequence(Expr::Kind::List, "]", line);
        if (skip_op("{")) return dict(line);
        break;
      default:
        break;
    }
    fail("unexpected " + describe());
  }

  ExprPtr sequence(Expr::Kind kind, std::string_view close, int line) {
    auto e = make(kind, line);
    while (!skip_op(close)) {
      if (!e->kids.empty()) expect_op(",");
      if (skip_op(close)) break;
      e->kids.push_back(expression(true));
    }
    return e;
  }

  ExprPtr dict(int line) {
    auto e = make(Expr::Kind::Dict, line);
    while (!skip_op("}")) {
      if (!e->kids.empty()) expect_op(",");
      if (skip_op("}")) break;
      e->kids.push_back(expression(true));
      expect_op(":");
      e->kids.push_back(expression(true));
    }
    return e;
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      const int line = cur().line;
      if (skip_op(".")) {
        auto a = make(Expr::Kind::Attr, line);
        a->kids.push_back(std::move(e));
        if (cur().type == T::Int) {  // x.0 is x[0]
          a->kind = Expr::Kind::Item;
          a->kids.push_back(primary());
        } else {
          a->name = expect_name();
        }
        e = fin(std::move(a));
      } else if (skip_op("[")) {
        e = fin(subscript(std::move(e), line));
      } else if (is_op("(")) {
        auto c = make(Expr::Kind::Call, line);
        c->kids.push_back(std::move(e));
        c->args = call_args();
        e = fin(std::move(c));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr obj, int line) {
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    for (;;) {
      if (!is_op(":") && !is_op("]")) parts[n] = expression(true);
      if (skip_op(":")) {
        slice = true;
        if (++n > 2) fail("bad slice");
        continue;
      }
      expect_op("]");
      break;
    }
    auto e = make(slice ? Expr::Kind::Slice : Expr::Kind::Item, line);
    e->kids.push_back(std::move(obj));
    if (!slice) {
      if (!parts[0]) fail("empty subscript");
      e->kids.push_back(std::move(parts[0]));
    } else {
      for (auto& p : parts) e->kids.push_back(std::move(p));
    }
    return e;
  }

  Args call_args() {
    Args a;
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (skip_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs are not supported");
      if (cur().type == T::Name && t_[p_ + 1].type == T::Op && t_[p_ + 1].value == "=") {
        std::string k = next().value;
        next();
        a.keyword.emplace_back(std::move(k), expression(true));
      } else {
        if (!a.keyword.empty()) fail("positional argument after a keyword argument");
        a.positional.push_back(expression(true));
      }
    }
    return a;
  }

  // `| name(args)` filters, `is [not] name args` tests and calls after them.
  ExprPtr filter_expr(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        e = filter_chain(std::move(e));
      } else if (is_name("is")) {
        e = test(std::move(e));
      } else if (is_op("(")) {
        auto c = make(Expr::Kind::Call, cur().line);
        c->kids.push_back(std::move(e));
        c->args = call_args();
        e = fin(std::move(c));
      } else {
        return e;
      }
    }
  }

  // One or more `| name(args)` (with a null operand: a filter block's).
  ExprPtr filter_chain(ExprPtr e) {
    bool first = e == nullptr;
    while (first || skip_op("|")) {
      first = false;
      auto f = make(Expr::Kind::Filter, cur().line);
      f->name = expect_name();
      while (skip_op(".")) f->name += "." + expect_name();
      if (is_op("(")) f->args = call_args();
      f->kids.push_back(std::move(e));
      e = fin(std::move(f));
    }
    return e;
  }

  ExprPtr test(ExprPtr e) {
    auto t = make(Expr::Kind::Test, next().line);
    t->negated = skip_name("not");
    t->name = expect_name();
    while (skip_op(".")) t->name += "." + expect_name();
    t->kids.push_back(std::move(e));
    const T ty = cur().type;
    if (is_op("(")) {
      t->args = call_args();
    } else if ((ty == T::Name || ty == T::String || ty == T::Int || ty == T::Float || is_op("[") ||
                is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("a test cannot take 'is' as its argument");
      t->args.positional.push_back(postfix(primary()));
    }
    return fin(std::move(t));
  }

  std::vector<Token> t_;
  const Options& opt_;
  size_t p_ = 0;
  int depth_ = 0;
};

}  // namespace

Program parse_tokens(std::vector<Token> tokens, const Options& options) {
  return Parser(std::move(tokens), options).run();
}

}  // namespace tern::jinja
