// Tests (`x is name`): jinja2's builtin tests, Python's notion of each type.
#include <algorithm>

#include "interpreter.h"

namespace tern::jinja {
namespace {

const Value& operand(Interpreter& in, CallArgs& a, std::string_view test) {
  if (a.positional.empty()) in.fail("test '" + std::string(test) + "' needs an argument");
  return a.positional[0];
}

bool integer_value(Interpreter& in, const Value& v, std::string_view test, int64_t& out) {
  if (v.is_int()) {
    out = v.as_int();
    return true;
  }
  if (v.is_bool()) {
    out = v.as_bool();
    return true;
  }
  if (v.is_undefined()) in.fail("test '" + std::string(test) + "' on an undefined value");
  return false;
}

}  // namespace

bool has_test(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "defined",     "undefined",   "none",     "string",  "number",   "integer", "float",
      "mapping",     "iterable",    "sequence", "boolean", "true",     "false",   "even",
      "odd",         "divisibleby", "eq",       "equalto", "==",       "ne",      "!=",
      "lt",          "<",           "lessthan", "le",      "<=",       "gt",      ">",
      "greaterthan", "ge",          ">=",       "in",      "callable", "lower",   "upper",
      "sameas",      "escaped"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

bool apply_test(Interpreter& in, std::string_view n, const Value& v, CallArgs& a) {
  using T = Value::Type;
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.is_none();
  if (n == "string") return v.is_string();
  if (n == "number") return v.is_number() || v.is_bool();  // bool is a Number in Python
  if (n == "integer") return v.is_int();
  if (n == "float") return v.is_float();
  if (n == "mapping") return v.is_object();
  if (n == "iterable") return v.is_string() || v.is_array() || v.is_object() || v.is_undefined();
  if (n == "sequence") return v.is_string() || v.is_array() || v.is_object();
  if (n == "boolean") return v.is_bool();
  if (n == "true") return v.is_bool() && v.as_bool();
  if (n == "false") return v.is_bool() && !v.as_bool();
  if (n == "callable") return v.type() == T::Function;
  if (n == "escaped") return false;
  if (n == "lower" || n == "upper") {
    if (!v.is_string()) return false;
    const std::string& t = v.text();
    const bool has_upper =
        std::any_of(t.begin(), t.end(), [](char c) { return std::isupper(uint8_t(c)); });
    const bool has_lower =
        std::any_of(t.begin(), t.end(), [](char c) { return std::islower(uint8_t(c)); });
    return n == "lower" ? has_lower && !has_upper : has_upper && !has_lower;
  }
  if (n == "even" || n == "odd" || n == "divisibleby") {
    int64_t i = 0;
    if (!integer_value(in, v, n, i)) in.fail("test '" + std::string(n) + "' needs an integer");
    if (n == "divisibleby") {
      int64_t d = 0;
      if (!integer_value(in, operand(in, a, n), n, d) || d == 0)
        in.fail("divisibleby needs a non-zero integer");
      return d == -1 || i % d == 0;
    }
    return (i % 2 == 0) == (n == "even");
  }
  if (n == "sameas") return v.same(operand(in, a, n));
  if (n == "eq" || n == "equalto" || n == "==") return equals(v, operand(in, a, n));
  if (n == "ne" || n == "!=") return !equals(v, operand(in, a, n));
  if (n == "lt" || n == "<" || n == "lessthan") return less(in, v, operand(in, a, n));
  if (n == "gt" || n == ">" || n == "greaterthan") return less(in, operand(in, a, n), v);
  if (n == "le" || n == "<=") return !less(in, operand(in, a, n), v);
  if (n == "ge" || n == ">=") return !less(in, v, operand(in, a, n));
  if (n == "in") {
    const Value& hay = operand(in, a, n);
    if (hay.is_string()) return v.is_string() && hay.text().find(v.text()) != std::string::npos;
    if (hay.is_object()) return v.is_string() && hay.as_object().find(v.text());
    for (const Value& x : iterate(in, hay))
      if (equals(x, v)) return true;
    return false;
  }
  in.fail("unsupported test '" + std::string(n) + "'");
}

}  // namespace tern::jinja
