#pragma once
// Runs a parsed template (see template.h): scopes, output buffers, the
// statement walker (exec.cpp), the expression evaluator (eval.cpp), and the
// tables of filters, tests and methods (filters.cpp, methods.cpp) it calls.
// Every step is counted and every nesting level bounded (Options).
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ast.h"
#include "tern/jinja/template.h"

namespace tern::jinja {

// Variables of one block: the template's top level, a loop iteration, a macro call.
struct Scope {
  std::unordered_map<std::string, Value> vars;
  Scope* parent = nullptr;
};

class Interpreter {
 public:
  Interpreter(const Options& o, Scope& globals) : opt_(o), globals_(globals) {}

  Str render(const Program& p);

  // --- used by filters, tests, methods and macros ---
  Value eval(const Expr& e);
  const Options& options() const { return opt_; }
  void step();                          // counts one step; throws past max_steps
  void check_size(size_t bytes) const;  // throws if a string would pass max_output
  [[noreturn]] void fail(const std::string& what) const;  // Error naming the current line
  Value call(const Value& callee, CallArgs& args, std::string_view what);

 private:
  enum class Flow { Normal, Break, Continue };
  friend struct DepthGuard;

  Flow exec(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  Value make_macro(const Stmt& s);
  Value run_macro(const Stmt& s, CallArgs& args, const Value& caller);
  Str capture(const Body& body, Scope* scope);
  void emit(const Str& s);

  Value lookup(const std::string& name) const;
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_filter(const Expr& e);
  Value eval_test(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_slice(const Expr& e);
  CallArgs eval_args(const Args& a);

  const Options& opt_;
  Scope& globals_;
  Scope* scope_ = nullptr;  // innermost
  Scope* top_ = nullptr;    // the template's top level (macros run below it)
  std::vector<Str> out_;    // output buffers: the template's, then set/macro/filter blocks
  Value implicit_;          // the operand of a filter block's filters
  int64_t steps_ = 0;
  int depth_ = 0;
  int line_ = 0;
};

// RAII: one more nesting level (eval, exec, macro call), refused past max_depth.
struct DepthGuard {
  Interpreter& in;
  explicit DepthGuard(Interpreter& i);
  ~DepthGuard() { --in.depth_; }
};

// Attribute and item access with jinja2's rules (dict keys, list indexes,
// methods as bound functions; undefined for what is missing).
Value get_attr(Interpreter& in, const Value& obj, const std::string& name);
Value get_item(Interpreter& in, const Value& obj, const Value& key);
// A bound method of a str, list or dict; undefined if there is none.
Value method(const Value& self, const std::string& name);

// Python's < for the comparable types (numbers, strings, lists); throws otherwise.
bool less(Interpreter& in, const Value& a, const Value& b);
// The items a for loop (or list()) walks: a list's values, a dict's keys, a
// string's characters; undefined walks nothing.
Array iterate(Interpreter& in, const Value& v);

// Filters (filters.cpp) and tests (tests.cpp) by name; apply_* throw for an unknown name.
bool has_filter(std::string_view name);
Value apply_filter(Interpreter& in, std::string_view name, const Value& v, CallArgs& args);
bool has_test(std::string_view name);
bool apply_test(Interpreter& in, std::string_view name, const Value& v, CallArgs& args);
// The global functions: range, namespace, dict, raise_exception, strftime_now.
void add_globals(Scope& s, const Options& o);

// Code-point helpers for strings.
std::vector<size_t> char_offsets(std::string_view s);  // byte offset of each code point, + size
Str str_slice(const Str& s, int64_t start, int64_t stop, int64_t step, bool has_start,
              bool has_stop);

}  // namespace tern::jinja
