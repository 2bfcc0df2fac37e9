#pragma once
// Values of the Jinja engine: Python's types as chat templates see them
// (undefined, None, bool, int, float, str, list, dict, callables).
// Lists and dicts are shared by reference, like Python's; strings are Strs
// (text with input marks, see str.h) shared immutably.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tern/jinja/error.h"
#include "tern/jinja/str.h"

namespace tern::jinja {

class Value;
class Interpreter;

using Array = std::vector<Value>;

// A dict with string keys, in insertion order (Python 3.7+).
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // namespace(): the one dict `set ns.x = ...` may change
  bool input_keys = false;    // the keys came from input (from_json with input)
  // Keys that are not strings ({1: 'a'}) are stored as their str() and kept
  // here, in items' order (empty while every key is a string).
  std::vector<Value> typed_keys;
  Value key(size_t i) const;  // the key of items[i] (a string marked if input_keys)
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(std::string key, Value v);
  void set_key(const Value& key, Value v);
  void erase(std::string_view key);
};

struct Undefined {
  std::string name;  // what was looked up, for the error message
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* get(size_t i, std::string_view name) const;  // positional i or keyword name
};

struct Function {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> call;
};

class Value {
 public:
  enum class Type { Undefined, None, Bool, Int, Float, String, Array, Object, Function };

  Value() : v_(Undefined{}) {}
  static Value undefined(std::string name = {}) { return Value(Undefined{std::move(name)}); }
  static Value none() { return Value(std::monostate{}); }
  Value(bool b) : v_(b) {}
  Value(int64_t i) : v_(i) {}
  Value(int i) : v_(int64_t(i)) {}
  Value(double d) : v_(d) {}
  Value(Str s) : v_(std::make_shared<const Str>(std::move(s))) {}
  Value(std::string s) : Value(Str(std::move(s))) {}
  Value(const char* s) : Value(Str(std::string(s))) {}
  Value(Array a) : v_(std::make_shared<Array>(std::move(a))) {}
  Value(Object o) : v_(std::make_shared<Object>(std::move(o))) {}
  Value(Function f) : v_(std::make_shared<const Function>(std::move(f))) {}

  Type type() const { return Type(v_.index()); }
  bool is_undefined() const { return type() == Type::Undefined; }
  bool is_none() const { return type() == Type::None; }
  bool is_bool() const { return type() == Type::Bool; }
  bool is_int() const { return type() == Type::Int; }
  bool is_float() const { return type() == Type::Float; }
  bool is_number() const { return is_int() || is_float(); }  // bools too in Python; not here
  bool is_string() const { return type() == Type::String; }
  bool is_array() const { return type() == Type::Array; }
  bool is_object() const { return type() == Type::Object; }
  bool is_function() const { return type() == Type::Function; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  double as_double() const {
    return is_int() ? double(as_int()) : is_bool() ? as_bool() : as_float();
  }
  const Str& as_str() const { return *std::get<std::shared_ptr<const Str>>(v_); }
  const std::string& text() const { return as_str().text(); }
  Array& as_array() const { return *std::get<std::shared_ptr<Array>>(v_); }
  Object& as_object() const { return *std::get<std::shared_ptr<Object>>(v_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(v_); }
  const std::string& undefined_name() const { return std::get<Undefined>(v_).name; }

  // Python's bool(x).
  bool truthy() const;
  // Python's type name, for error messages ("str", "dict", "NoneType", ...).
  std::string_view type_name() const;
  // Number of items (str: code points); -1 if the value has no length.
  int64_t length() const;
  // The same object (lists, dicts, functions) or equal scalars (Python's `is`).
  bool same(const Value& o) const;

 private:
  using Var = std::variant<Undefined, std::monostate, bool, int64_t, double,
                           std::shared_ptr<const Str>, std::shared_ptr<Array>,
                           std::shared_ptr<Object>, std::shared_ptr<const Function>>;
  explicit Value(Var v) : v_(std::move(v)) {}
  Var v_;
};

// Python's ==.
bool equals(const Value& a, const Value& b);
// Python's str(x), with the input marks of the strings it copies
// (undefined renders as "").
Str to_str(const Value& v);
// Python's repr(x) (strings quoted as Python quotes them).
std::string repr(const Value& v);
// Python's float repr: shortest round-trip digits ("1.0", "1e-05", "inf").
std::string format_float(double d);

// JSON into values; `input` marks every string as input.
Value from_json(const nlohmann::ordered_json& j, bool input);
// json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=...) as
// transformers' tojson calls it: separators (", ", ": ") without indent,
// ("," ": ") with it. Strings keep their input marks (a string that holds any
// input byte is marked whole, quotes excluded).
// ensure_ascii writes non-ASCII characters as \uXXXX escapes.
Str to_json(const Value& v, int indent, bool sort_keys, std::string_view item_sep = {},
            std::string_view key_sep = {}, bool ensure_ascii = false);

}  // namespace tern::jinja
