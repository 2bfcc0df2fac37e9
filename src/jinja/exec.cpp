// The statement walker: output, if, for, set, macros, call and filter blocks
// (see interpreter.h), and Template's entry points.
#include <algorithm>
#include <memory>

#include "interpreter.h"
#include "parser.h"

namespace tern::jinja {

DepthGuard::DepthGuard(Interpreter& i) : in(i) {
  if (++in.depth_ > in.opt_.max_depth)
    in.fail("nesting or recursion deeper than " + std::to_string(in.opt_.max_depth));
}

void Interpreter::fail(const std::string& what) const {
  throw Error("template line " + std::to_string(line_) + ": " + what);
}

void Interpreter::step() {
  if (++steps_ > opt_.max_steps)
    fail("more than " + std::to_string(opt_.max_steps) + " steps (a loop too long?)");
}

void Interpreter::check_size(size_t bytes) const {
  if (bytes > opt_.max_output)
    fail("a string or the output would pass " + std::to_string(opt_.max_output) + " bytes");
}

void Interpreter::emit(const Str& s) {
  check_size(out_.back().size() + s.size());
  out_.back().append(s);
}

Str Interpreter::render(const Program& p) {
  Scope top{{}, &globals_};
  scope_ = top_ = &top;
  out_.emplace_back();
  const Flow f = exec(p.body);
  if (f != Flow::Normal) fail("'break' or 'continue' outside a loop");
  return std::move(out_.back());
}

Value Interpreter::lookup(const std::string& name) const {
  for (const Scope* s = scope_; s; s = s->parent) {
    const auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  return Value::undefined(name);
}

// Runs `body` in `scope` with a fresh output buffer; returns what it wrote.
Str Interpreter::capture(const Body& body, Scope* scope) {
  Scope* saved = scope_;
  scope_ = scope;
  out_.emplace_back();
  try {
    if (exec(body) != Flow::Normal) fail("'break' or 'continue' outside a loop");
  } catch (...) {
    out_.pop_back();
    scope_ = saved;
    throw;
  }
  Str s = std::move(out_.back());
  out_.pop_back();
  scope_ = saved;
  return s;
}

Interpreter::Flow Interpreter::exec(const Body& body) {
  DepthGuard d(*this);
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  step();
  line_ = s.line;
  switch (s.kind) {
    case Stmt::Kind::Text:
      emit(Str(s.text));
      return Flow::Normal;
    case Stmt::Kind::Output:
      emit(to_str(eval(*s.expr)));
      return Flow::Normal;
    case Stmt::Kind::If:
      for (size_t i = 0; i < s.conds.size(); ++i) {
        line_ = s.line;
        if (eval(*s.conds[i]).truthy()) return exec(s.bodies[i]);
      }
      return s.bodies.size() > s.conds.size() ? exec(s.bodies.back()) : Flow::Normal;
    case Stmt::Kind::For:
      return exec_for(s);
    case Stmt::Kind::Set:
    case Stmt::Kind::SetBlock:
      exec_set(s);
      return Flow::Normal;
    case Stmt::Kind::Macro:
      scope_->vars[s.name] = make_macro(s);
      return Flow::Normal;
    case Stmt::Kind::CallBlock: {
      // caller() runs the block in this scope; kept past the block (in a
      // namespace, say) it refuses to run rather than reach a dead scope.
      const Stmt* block = &s;
      Scope* here = scope_;
      auto alive = std::make_shared<bool>(true);
      Function caller{"caller", [block, here, alive](Interpreter& in, CallArgs& args) -> Value {
                        if (!*alive) in.fail("caller() called after its call block ended");
                        Scope local{{}, here};
                        for (size_t i = 0; i < block->params.size(); ++i) {
                          const Value* v = args.get(i, block->params[i].name);
                          local.vars[block->params[i].name] = v ? *v : Value::undefined();
                        }
                        return Value(in.capture(block->bodies[0], &local));
                      }};
      const Expr& call = *s.expr;
      CallArgs args = eval_args(call.args);
      args.keyword.emplace_back("caller", Value(std::move(caller)));
      struct Expire {
        std::shared_ptr<bool> alive;
        ~Expire() { *alive = false; }
      } expire{alive};
      emit(to_str(this->call(eval(*call.kids[0]), args, "call block")));
      return Flow::Normal;
    }
    case Stmt::Kind::FilterBlock: {
      Scope local{{}, scope_};
      Value saved = implicit_;
      implicit_ = Value(capture(s.bodies[0], &local));
      Value v = eval(*s.expr);
      implicit_ = saved;
      emit(to_str(v));
      return Flow::Normal;
    }
    case Stmt::Kind::Break:
      return Flow::Break;
    case Stmt::Kind::Continue:
      return Flow::Continue;
    case Stmt::Kind::Scope: {
      Scope local{{}, scope_};
      emit(capture(s.bodies[0], &local));
      return Flow::Normal;
    }
  }
  return Flow::Normal;
}

namespace {

// Binds a loop target (or set target) list to one item.
void unpack(Interpreter& in, Scope& scope, const std::vector<std::string>& names, const Value& v) {
  if (names.size() == 1) {
    scope.vars[names[0]] = v;
    return;
  }
  Array items = iterate(in, v);
  if (items.size() != names.size())
    in.fail("cannot unpack " + std::to_string(items.size()) + " values into " +
            std::to_string(names.size()) + " names");
  for (size_t i = 0; i < names.size(); ++i) scope.vars[names[i]] = items[i];
}

Value loop_object(const Array& items, size_t i) {
  const int64_t n = int64_t(items.size());
  const int64_t k = int64_t(i);
  Object loop;
  loop.set("index", Value(k + 1));
  loop.set("index0", Value(k));
  loop.set("revindex", Value(n - k));
  loop.set("revindex0", Value(n - k - 1));
  loop.set("first", Value(i == 0));
  loop.set("last", Value(k == n - 1));
  loop.set("length", Value(n));
  loop.set("depth", Value(1));
  loop.set("depth0", Value(0));
  loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("previtem"));
  loop.set("nextitem", k + 1 < n ? items[i + 1] : Value::undefined("nextitem"));
  loop.set("cycle", Value(Function{"cycle", [k](Interpreter& in, CallArgs& a) -> Value {
                                     if (a.positional.empty()) in.fail("loop.cycle() needs values");
                                     return a.positional[size_t(k) % a.positional.size()];
                                   }}));
  return Value(std::move(loop));
}

}  // namespace

Interpreter::Flow Interpreter::exec_for(const Stmt& s) {
  const Array all = iterate(*this, eval(*s.expr));
  Array items;
  if (s.cond) {
    for (const Value& v : all) {
      step();
      Scope probe{{}, scope_};
      unpack(*this, probe, s.targets, v);
      Scope* saved = scope_;
      scope_ = &probe;
      const bool keep = eval(*s.cond).truthy();
      scope_ = saved;
      if (keep) items.push_back(v);
    }
  } else {
    items = all;
  }
  if (items.empty()) {
    if (s.bodies.size() > 1) {
      Scope local{{}, scope_};
      emit(capture(s.bodies[1], &local));
    }
    return Flow::Normal;
  }
  Scope* saved = scope_;
  for (size_t i = 0; i < items.size(); ++i) {
    step();
    Scope iter{{}, saved};
    unpack(*this, iter, s.targets, items[i]);
    iter.vars["loop"] = loop_object(items, i);
    scope_ = &iter;
    Flow f;
    try {
      f = exec(s.bodies[0]);
    } catch (...) {
      scope_ = saved;
      throw;
    }
    scope_ = saved;
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::exec_set(const Stmt& s) {
  Value v;
  if (s.kind == Stmt::Kind::SetBlock) {
    Scope local{{}, scope_};
    v = Value(capture(s.bodies[0], &local));
    if (s.expr) {
      Value saved = implicit_;
      implicit_ = v;
      v = eval(*s.expr);
      implicit_ = saved;
    }
  } else {
    v = eval(*s.expr);
  }
  if (s.target) {
    const Value ns = lookup(s.target->kids[0]->name);
    if (!ns.is_object() || !ns.as_object().is_namespace)
      fail("cannot assign attribute '" + s.target->name + "' on a non-namespace object");
    ns.as_object().set(s.target->name, std::move(v));
    return;
  }
  unpack(*this, *scope_, s.targets, v);
}

Value Interpreter::make_macro(const Stmt& s) {
  const Stmt* m = &s;
  return Value(Function{s.name, [m](Interpreter& in, CallArgs& args) -> Value {
                          Value caller = Value::undefined("caller");
                          std::erase_if(args.keyword, [&](auto& kv) {
                            if (kv.first != "caller") return false;
                            caller = kv.second;
                            return true;
                          });
                          return in.run_macro(*m, args, caller);
                        }});
}

Value Interpreter::run_macro(const Stmt& m, CallArgs& args, const Value& caller) {
  DepthGuard d(*this);
  if (args.positional.size() > m.params.size())
    fail("macro '" + m.name + "' takes not more than " + std::to_string(m.params.size()) +
         " argument(s)");
  for (const auto& kw : args.keyword) {
    const std::string& k = kw.first;
    const bool known =
        std::any_of(m.params.begin(), m.params.end(), [&](const Param& p) { return p.name == k; });
    if (!known) fail("macro '" + m.name + "' takes no keyword argument '" + k + "'");
  }
  Scope local{{}, top_};
  if (!caller.is_undefined()) local.vars["caller"] = caller;
  Scope* saved = scope_;
  scope_ = &local;
  try {
    for (size_t i = 0; i < m.params.size(); ++i) {
      const Value* v = args.get(i, m.params[i].name);
      local.vars[m.params[i].name] = v ? *v
                                     : m.params[i].default_value
                                         ? eval(*m.params[i].default_value)
                                         : Value::undefined(m.params[i].name);
    }
  } catch (...) {
    scope_ = saved;
    throw;
  }
  scope_ = saved;
  const int line = line_;
  Str out = capture(m.bodies[0], &local);
  line_ = line;
  return Value(std::move(out));
}

Template Template::parse(std::string_view source, Options options) {
  auto p = std::make_shared<Program>(parse_tokens(lex(source, options), options));
  return Template(std::move(p), options);
}

Str Template::render(const Object& context) const {
  Scope globals;
  add_globals(globals, options_);
  for (const auto& [k, v] : context.items) globals.vars[k] = v;
  Interpreter in(options_, globals);
  return in.render(*program_);
}

}  // namespace tern::jinja
