// The expression evaluator (see interpreter.h): names, literals, operators
// with Python's semantics, attribute/item/slice access, calls, filters, tests.
#include <cmath>

#include "interpreter.h"

namespace tern::jinja {
namespace {

[[noreturn]] void undefined_error(Interpreter& in, const Value& v) {
  const std::string& n = v.undefined_name();
  in.fail(n.empty() ? "undefined value used" : "'" + n + "' is undefined");
}

// a op b for int64 with overflow refused (Python's ints are unbounded; templates never need that).
template <typename Op>
int64_t checked(Interpreter& in, int64_t a, int64_t b, Op op) {
  int64_t r = 0;
  if (op(a, b, &r)) in.fail("integer overflow");
  return r;
}

Value arith(Interpreter& in, const std::string& op, const Value& a, const Value& b) {
  const bool ai = a.is_int() || a.is_bool(), bi = b.is_int() || b.is_bool();
  const int64_t x = ai ? (a.is_bool() ? a.as_bool() : a.as_int()) : 0;
  const int64_t y = bi ? (b.is_bool() ? b.as_bool() : b.as_int()) : 0;
  const double fx = a.as_double(), fy = b.as_double();
  if (op == "+") {
    if (ai && bi)
      return checked(in, x, y, [](int64_t p, int64_t q, int64_t* r) {
        return __builtin_add_overflow(p, q, r);
      });
    return fx + fy;
  }
  if (op == "-") {
    if (ai && bi)
      return checked(in, x, y, [](int64_t p, int64_t q, int64_t* r) {
        return __builtin_sub_overflow(p, q, r);
      });
    return fx - fy;
  }
  if (op == "*") {
    if (ai && bi)
      return checked(in, x, y, [](int64_t p, int64_t q, int64_t* r) {
        return __builtin_mul_overflow(p, q, r);
      });
    return fx * fy;
  }
  if ((op == "/" || op == "//" || op == "%") && (ai && bi ? y == 0 : fy == 0.0))
    in.fail(op == "%" ? "modulo by zero" : "division by zero");
  if (op == "/") return fx / fy;
  if (op == "//") {
    if (ai && bi) {
      if (x == INT64_MIN && y == -1) in.fail("integer overflow");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return q;
    }
    return std::floor(fx / fy);
  }
  if (op == "%") {
    if (ai && bi) {
      if (y == -1) return int64_t(0);
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return m;
    }
    double m = std::fmod(fx, fy);
    if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
    return m;
  }
  if (op == "**") {
    if (ai && bi && y >= 0) {
      int64_t acc = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(acc, x, &acc)) in.fail("integer overflow");
        if (acc == 0 || acc == 1) break;
      }
      return acc;
    }
    return std::pow(fx, fy);
  }
  in.fail("unknown operator " + op);
}

// a * n for a string or list.
Value repeat(Interpreter& in, const Value& a, int64_t n) {
  if (n <= 0) return a.is_string() ? Value(std::string()) : Value(Array{});
  const size_t unit = a.is_string() ? a.as_str().size() : a.as_array().size();
  if (unit != 0 && uint64_t(n) > in.options().max_output / unit) in.check_size(SIZE_MAX);
  if (a.is_string()) {
    Str out;
    for (int64_t i = 0; i < n; ++i) out.append(a.as_str());
    return Value(std::move(out));
  }
  Array out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), a.as_array().begin(), a.as_array().end());
  return Value(std::move(out));
}

}  // namespace

Value Interpreter::eval(const Expr& e) {
  DepthGuard d(*this);
  switch (e.kind) {
    case Expr::Kind::Literal:
      return e.literal;
    case Expr::Kind::Name:
      return lookup(e.name);
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      Array a;
      for (const ExprPtr& k : e.kids) a.push_back(eval(*k));
      return Value(std::move(a));
    }
    case Expr::Kind::Dict: {
      Object o;
      for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
        // Keys are strings; others (1, True) keep their str() (get_item looks them up so).
        const Value k = eval(*e.kids[i]);
        if (!k.is_string() && !k.is_int() && !k.is_bool() && !k.is_none())
          fail("unsupported dict key type '" + std::string(k.type_name()) + "'");
        o.set_key(k, eval(*e.kids[i + 1]));
      }
      return Value(std::move(o));
    }
    case Expr::Kind::Attr:
      return get_attr(*this, eval(*e.kids[0]), e.name);
    case Expr::Kind::Item:
      return get_item(*this, eval(*e.kids[0]), eval(*e.kids[1]));
    case Expr::Kind::Slice:
      return eval_slice(e);
    case Expr::Kind::Call:
      return eval_call(e);
    case Expr::Kind::Filter:
      return eval_filter(e);
    case Expr::Kind::Test:
      return eval_test(e);
    case Expr::Kind::Unary: {
      const Value v = eval(*e.kids[0]);
      if (e.name == "not") return !v.truthy();
      if (v.is_undefined()) undefined_error(*this, v);
      if (v.is_int()) {
        if (e.name == "-" && v.as_int() == INT64_MIN) fail("integer overflow");
        return e.name == "-" ? Value(-v.as_int()) : v;
      }
      if (v.is_float()) return e.name == "-" ? Value(-v.as_float()) : v;
      if (v.is_bool()) return Value(int64_t(e.name == "-" ? -int(v.as_bool()) : int(v.as_bool())));
      fail("bad operand type for unary " + e.name + ": '" + std::string(v.type_name()) + "'");
    }
    case Expr::Kind::Binary:
      return eval_binary(e);
    case Expr::Kind::Compare:
      return eval_compare(e);
    case Expr::Kind::Cond:
      if (eval(*e.kids[0]).truthy()) return eval(*e.kids[1]);
      return e.kids[2] ? eval(*e.kids[2]) : Value::undefined();
  }
  return Value::undefined();
}

Value Interpreter::eval_binary(const Expr& e) {
  const std::string& op = e.name;
  if (op == "and" || op == "or") {
    Value a = eval(*e.kids[0]);
    if (a.truthy() == (op == "or")) return a;
    return eval(*e.kids[1]);
  }
  const Value a = eval(*e.kids[0]);
  const Value b = eval(*e.kids[1]);
  if (op == "~") {
    Str s = to_str(a);
    check_size(s.size() + to_str(b).size());
    return Value(s.append(to_str(b)));
  }
  // A string plus an undefined value is the string, as llama.cpp's engine
  // has it (jinja2 raises): templates that add a missing optional field
  // ("): " + param.description) render as they do under llama.cpp.
  if (op == "+" && a.is_string() && b.is_undefined()) return a;
  if (op == "+" && a.is_undefined() && b.is_string()) return b;
  if (a.is_undefined()) undefined_error(*this, a);
  if (b.is_undefined()) undefined_error(*this, b);
  const bool an = a.is_number() || a.is_bool(), bn = b.is_number() || b.is_bool();
  if (an && bn) return arith(*this, op, a, b);
  if (op == "+" && a.is_string() && b.is_string()) {
    check_size(a.as_str().size() + b.as_str().size());
    Str s = a.as_str();
    return Value(s.append(b.as_str()));
  }
  if (op == "+" && a.is_array() && b.is_array()) {
    check_size(a.as_array().size() + b.as_array().size());
    Array out = a.as_array();
    out.insert(out.end(), b.as_array().begin(), b.as_array().end());
    return Value(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_array()) && (b.is_int() || b.is_bool()))
    return repeat(*this, a, b.is_int() ? b.as_int() : b.as_bool());
  if (op == "*" && (b.is_string() || b.is_array()) && (a.is_int() || a.is_bool()))
    return repeat(*this, b, a.is_int() ? a.as_int() : a.as_bool());
  if (op == "+" && a.is_string())
    fail("can only concatenate str (not \"" + std::string(b.type_name()) + "\") to str");
  fail("unsupported operand type(s) for " + op + ": '" + std::string(a.type_name()) + "' and '" +
       std::string(b.type_name()) + "'");
}

bool less(Interpreter& in, const Value& a, const Value& b) {
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool()))
    return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string()) return a.text() < b.text();
  if (a.is_array() && b.is_array()) {
    const Array &x = a.as_array(), &y = b.as_array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less(in, x[i], y[i])) return true;
      if (less(in, y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  in.fail("'<' not supported between instances of '" + std::string(a.type_name()) + "' and '" +
          std::string(b.type_name()) + "'");
}

namespace {

bool contains(Interpreter& in, const Value& hay, const Value& needle) {
  if (hay.is_string()) {
    if (!needle.is_string())
      in.fail("'in <string>' requires string as left operand, not " +
              std::string(needle.type_name()));
    return hay.text().find(needle.text()) != std::string::npos;
  }
  if (hay.is_array()) {
    for (const Value& v : hay.as_array())
      if (equals(v, needle)) return true;
    return false;
  }
  if (hay.is_object()) return needle.is_string() && hay.as_object().find(needle.text()) != nullptr;
  if (hay.is_undefined()) return false;
  in.fail("argument of type '" + std::string(hay.type_name()) + "' is not iterable");
}

}  // namespace

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.kids[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.kids[i + 1]);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") {
      r = equals(left, right);
    } else if (op == "!=") {
      r = !equals(left, right);
    } else if (op == "<") {
      r = less(*this, left, right);
    } else if (op == ">") {
      r = less(*this, right, left);
    } else if (op == "<=") {
      r = !less(*this, right, left);
    } else if (op == ">=") {
      r = !less(*this, left, right);
    } else if (op == "in") {
      r = contains(*this, right, left);
    } else {
      r = !contains(*this, right, left);
    }
    if (!r) return false;
    left = std::move(right);
  }
  return true;
}

CallArgs Interpreter::eval_args(const Args& a) {
  CallArgs out;
  for (const ExprPtr& p : a.positional) out.positional.push_back(eval(*p));
  for (const auto& [k, v] : a.keyword) out.keyword.emplace_back(k, eval(*v));
  return out;
}

Value Interpreter::call(const Value& callee, CallArgs& args, std::string_view what) {
  step();
  if (callee.is_undefined()) undefined_error(*this, callee);
  if (!callee.is_function())
    fail("'" + std::string(callee.type_name()) + "' object is not callable (" + std::string(what) +
         ")");
  DepthGuard d(*this);
  const int line = line_;
  Value r = callee.as_function().call(*this, args);
  line_ = line;
  return r;
}

Value Interpreter::eval_call(const Expr& e) {
  const Value callee = eval(*e.kids[0]);
  CallArgs args = eval_args(e.args);
  const Expr& c = *e.kids[0];
  return call(callee, args,
              c.kind == Expr::Kind::Name || c.kind == Expr::Kind::Attr ? c.name : "call");
}

Value Interpreter::eval_filter(const Expr& e) {
  Value operand = e.kids[0] ? eval(*e.kids[0]) : implicit_;
  if (!has_filter(e.name)) fail("unsupported filter '" + e.name + "'");
  CallArgs args = eval_args(e.args);
  step();
  return apply_filter(*this, e.name, operand, args);
}

Value Interpreter::eval_test(const Expr& e) {
  const Value operand = eval(*e.kids[0]);
  if (!has_test(e.name)) fail("unsupported test '" + e.name + "'");
  CallArgs args = eval_args(e.args);
  return apply_test(*this, e.name, operand, args) != e.negated;
}

Value Interpreter::eval_slice(const Expr& e) {
  const Value obj = eval(*e.kids[0]);
  int64_t idx[3] = {0, 0, 1};
  bool has[3] = {false, false, false};
  for (int i = 0; i < 3; ++i) {
    if (!e.kids[size_t(i) + 1]) continue;
    const Value v = eval(*e.kids[size_t(i) + 1]);
    if (v.is_none()) continue;
    if (!v.is_int()) fail("slice indices must be integers or None");
    idx[i] = v.as_int();
    has[i] = true;
  }
  if (idx[2] == 0) fail("slice step cannot be zero");
  if (obj.is_undefined()) undefined_error(*this, obj);
  if (obj.is_string())
    return Value(str_slice(obj.as_str(), idx[0], idx[1], idx[2], has[0], has[1]));
  if (!obj.is_array()) fail("'" + std::string(obj.type_name()) + "' object is not subscriptable");
  const Array& a = obj.as_array();
  const int64_t n = int64_t(a.size());
  auto clamp = [&](int64_t i, bool given, int64_t dflt) {
    if (!given) return dflt;
    if (i < 0) i += n;
    return idx[2] > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t start = clamp(idx[0], has[0], idx[2] > 0 ? 0 : n - 1);
  const int64_t stop = clamp(idx[1], has[1], idx[2] > 0 ? n : -1);
  Array out;
  for (int64_t i = start; idx[2] > 0 ? i < stop : i > stop; i += idx[2])
    out.push_back(a[size_t(i)]);
  return Value(std::move(out));
}

Value get_attr(Interpreter& in, const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(in, obj);
  if (obj.is_string() || obj.is_array() || obj.is_object()) {
    Value m = method(obj, name);
    if (!m.is_undefined()) return m;
  }
  if (obj.is_object()) {
    if (const Value* v = obj.as_object().find(name)) return *v;
  }
  return Value::undefined("'" +
                          std::string(obj.type_name() == "dict" ? "dict object" : obj.type_name()) +
                          "' has no attribute '" + name + "'");
}

Value get_item(Interpreter& in, const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(in, obj);
  if (obj.is_object() && key.is_string()) {
    if (const Value* v = obj.as_object().find(key.text())) return *v;
    return get_attr(in, obj, key.text());
  }
  if (obj.is_object() && (key.is_int() || key.is_bool() || key.is_none())) {
    if (const Value* v = obj.as_object().find(to_str(key).text())) return *v;
    return Value::undefined("key");
  }
  if ((obj.is_array() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.is_int() ? key.as_int() : key.as_bool();
    const int64_t n = obj.length();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("index out of range");
    if (obj.is_array()) return obj.as_array()[size_t(i)];
    return Value(str_slice(obj.as_str(), i, i + 1, 1, true, true));
  }
  if (key.is_string()) return get_attr(in, obj, key.text());
  return Value::undefined("item");
}

Array iterate(Interpreter& in, const Value& v) {
  switch (v.type()) {
    case Value::Type::Array:
      return v.as_array();
    case Value::Type::Object: {
      Array keys;
      const Object& o = v.as_object();
      for (size_t i = 0; i < o.items.size(); ++i) keys.push_back(o.key(i));
      return keys;
    }
    case Value::Type::String: {
      Array chars;
      const std::vector<size_t> off = char_offsets(v.text());
      for (size_t i = 0; i + 1 < off.size(); ++i)
        chars.push_back(Value(v.as_str().substr(off[i], off[i + 1] - off[i])));
      return chars;
    }
    case Value::Type::Undefined:
      return {};
    default:
      in.fail("'" + std::string(v.type_name()) + "' object is not iterable");
  }
}

}  // namespace tern::jinja
