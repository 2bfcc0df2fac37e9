// Values: Python's truthiness, equality, str(), repr() and JSON (see value.h).
#include "tern/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

namespace tern::jinja {

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

Value* Object::find(std::string_view key) {
  for (auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Object::set(std::string key, Value v) {
  if (Value* at = find(key)) {
    *at = std::move(v);
    return;
  }
  if (!typed_keys.empty()) typed_keys.push_back(Value(Str(key, input_keys)));
  items.emplace_back(std::move(key), std::move(v));
}

void Object::set_key(const Value& key, Value v) {
  if (key.is_string()) return set(key.text(), std::move(v));
  std::string name = to_str(key).text();
  if (Value* at = find(name)) {
    *at = std::move(v);
    return;
  }
  if (typed_keys.empty())
    for (size_t i = 0; i < items.size(); ++i) typed_keys.push_back(this->key(i));
  typed_keys.push_back(key);
  items.emplace_back(std::move(name), std::move(v));
}

void Object::erase(std::string_view key) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].first != key) continue;
    items.erase(items.begin() + long(i));
    if (!typed_keys.empty()) typed_keys.erase(typed_keys.begin() + long(i));
    return;
  }
}

Value Object::key(size_t i) const {
  return typed_keys.empty() ? Value(Str(items[i].first, input_keys)) : typed_keys[i];
}

const Value* CallArgs::get(size_t i, std::string_view name) const {
  if (i < positional.size()) return &positional[i];
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

bool Value::truthy() const {
  switch (type()) {
    case Type::Undefined:
    case Type::None:
      return false;
    case Type::Bool:
      return as_bool();
    case Type::Int:
      return as_int() != 0;
    case Type::Float:
      return as_float() != 0.0;
    case Type::String:
      return !as_str().empty();
    case Type::Array:
      return !as_array().empty();
    case Type::Object:
      return !as_object().items.empty();
    case Type::Function:
      return true;
  }
  return false;
}

std::string_view Value::type_name() const {
  static constexpr std::string_view kNames[] = {"Undefined", "NoneType", "bool", "int",     "float",
                                                "str",       "list",     "dict", "function"};
  return kNames[size_t(type())];
}

int64_t Value::length() const {
  switch (type()) {
    case Type::String:
      return int64_t(std::count_if(as_str().text().begin(), as_str().text().end(),
                                   [](char c) { return (uint8_t(c) & 0xC0) != 0x80; }));
    case Type::Array:
      return int64_t(as_array().size());
    case Type::Object:
      return int64_t(as_object().items.size());
    case Type::Undefined:
      return 0;
    default:
      return -1;
  }
}

bool Value::same(const Value& o) const {
  if (type() != o.type()) return false;
  switch (type()) {
    case Type::Array:
      return &as_array() == &o.as_array();
    case Type::Object:
      return &as_object() == &o.as_object();
    case Type::Function:
      return &as_function() == &o.as_function();
    default:
      return equals(*this, o);
  }
}

bool equals(const Value& a, const Value& b) {
  using T = Value::Type;
  const bool an = a.is_number() || a.is_bool();
  const bool bn = b.is_number() || b.is_bool();
  if (an && bn) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    const int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
    const int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
    return x == y;
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::Undefined:
    case T::None:
      return true;
    case T::String:
      return a.text() == b.text();
    case T::Array: {
      const Array& x = a.as_array();
      const Array& y = b.as_array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case T::Object: {
      const Object& x = a.as_object();
      const Object& y = b.as_object();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !equals(v, *w)) return false;
      }
      return true;
    }
    default:
      return a.same(b);
  }
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // "-1.2345e+02"
  const size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  const int exp = std::stoi(sci.substr(epos + 1));
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  const int decpt = exp + 1;  // value = 0.DIGITS x 10^decpt
  std::string out = neg ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + e;
  }
  if (decpt <= 0) return out + "0." + std::string(size_t(-decpt), '0') + digits;
  if (size_t(decpt) >= digits.size())
    return out + digits + std::string(size_t(decpt) - digits.size(), '0') + ".0";
  return out + digits.substr(0, size_t(decpt)) + "." + digits.substr(size_t(decpt));
}

std::string repr(const Value& v) {
  if (!v.is_string()) return to_str(v).text();
  const std::string& s = v.text();
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\' || c == q) {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + q;
}

Str to_str(const Value& v) {
  using T = Value::Type;
  switch (v.type()) {
    case T::Undefined:
      return Str();
    case T::None:
      return Str("None");
    case T::Bool:
      return Str(v.as_bool() ? "True" : "False");
    case T::Int:
      return Str(std::to_string(v.as_int()));
    case T::Float:
      return Str(format_float(v.as_float()));
    case T::String:
      return v.as_str();
    case T::Array: {
      Str out("[");
      bool first = true;
      for (const Value& x : v.as_array()) {
        if (!first) out.append(", ");
        first = false;
        out.append(repr(x));
      }
      return out.append("]");
    }
    case T::Object: {
      Str out("{");
      bool first = true;
      const Object& o = v.as_object();
      for (size_t i = 0; i < o.items.size(); ++i) {
        if (!first) out.append(", ");
        first = false;
        out.append(repr(o.key(i))).append(": ").append(repr(o.items[i].second));
      }
      return out.append("}");
    }
    case T::Function:
      return Str("<function " + v.as_function().name + ">");
  }
  return Str();
}

Value from_json(const nlohmann::ordered_json& j, bool input) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(Str(j.get<std::string>(), input));
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& x : j) a.push_back(from_json(x, input));
      return Value(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      o.input_keys = input;
      for (const auto& [k, x] : j.items()) o.items.emplace_back(k, from_json(x, input));
      return Value(std::move(o));
    }
    default:
      return Value::none();
  }
}

namespace {

// A JSON string literal as json.dumps(ensure_ascii=False) writes it.
void put_u16(std::string& out, uint32_t u) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", u);
  out += buf;
}

// Decodes the UTF-8 sequence at s[i] (advancing i); invalid bytes give U+FFFD.
uint32_t next_code_point(std::string_view s, size_t& i) {
  const uint8_t c = uint8_t(s[i++]);
  const int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
  uint32_t cp = n == 3 ? c & 0x07 : n == 2 ? c & 0x0F : n == 1 ? c & 0x1F : c;
  if (c >= 0x80 && n == 0) return 0xFFFD;
  for (int k = 0; k < n; ++k) {
    if (i >= s.size() || (uint8_t(s[i]) & 0xC0) != 0x80) return 0xFFFD;
    cp = (cp << 6) | (uint8_t(s[i++]) & 0x3F);
  }
  return cp;
}

std::string json_quote(std::string_view s, bool ensure_ascii = false) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    if (ensure_ascii && uint8_t(s[i]) >= 0x80) {
      const uint32_t cp = next_code_point(s, i);
      if (cp >= 0x10000) {
        put_u16(out, 0xD800 + ((cp - 0x10000) >> 10));
        put_u16(out, 0xDC00 + ((cp - 0x10000) & 0x3FF));
      } else {
        put_u16(out, cp);
      }
      continue;
    }
    const unsigned char c = uint8_t(s[i++]);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

struct JsonWriter {
  int indent;
  bool sort_keys;
  bool ensure_ascii;
  std::string_view item_sep, key_sep;
  Str out;
  int depth = 0;

  void newline(int level) {
    if (indent < 0) return;
    out.append("\n");
    out.append(std::string(size_t(indent) * size_t(level), ' '));
  }

  void write(const Value& v) {
    if (++depth > 256) throw Error("tojson: value nested too deeply");
    using T = Value::Type;
    switch (v.type()) {
      case T::None:
        out.append("null");
        break;
      case T::Bool:
        out.append(v.as_bool() ? "true" : "false");
        break;
      case T::Int:
        out.append(std::to_string(v.as_int()));
        break;
      case T::Float: {
        const double d = v.as_float();
        out.append(std::isnan(d)   ? "NaN"
                   : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                                   : format_float(d));
        break;
      }
      case T::String: {
        Str s(json_quote(v.text(), ensure_ascii));
        out.append("\"");
        out.append(Str(s.text().substr(1, s.size() - 2), v.as_str().any_input()));
        out.append("\"");
        break;
      }
      case T::Array:
        write_array(v.as_array());
        break;
      case T::Object:
        write_object(v.as_object());
        break;
      default:
        throw Error("tojson: Object of type " + std::string(v.type_name()) +
                    " is not JSON serializable");
    }
    --depth;
  }

  void write_array(const Array& a) {
    if (a.empty()) return void(out.append("[]"));
    out.append("[");
    for (size_t i = 0; i < a.size(); ++i) {
      if (i) out.append(item_sep);
      newline(depth);
      write(a[i]);
    }
    newline(depth - 1);
    out.append("]");
  }

  bool input_keys = false;
  void write_object(const Object& o) {
    input_keys = o.input_keys;
    if (o.items.empty()) return void(out.append("{}"));
    std::vector<const std::pair<std::string, Value>*> items;
    for (const auto& kv : o.items) items.push_back(&kv);
    if (sort_keys)
      std::stable_sort(items.begin(), items.end(),
                       [](auto* a, auto* b) { return a->first < b->first; });
    out.append("{");
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out.append(item_sep);
      newline(depth);
      const std::string key = json_quote(items[i]->first, ensure_ascii);
      out.append("\"");
      out.append(Str(key.substr(1, key.size() - 2), input_keys));
      out.append("\"");
      out.append(key_sep);
      write(items[i]->second);
    }
    newline(depth - 1);
    out.append("}");
  }
};

}  // namespace

Str to_json(const Value& v, int indent, bool sort_keys, std::string_view item_sep,
            std::string_view key_sep, bool ensure_ascii) {
  if (item_sep.empty()) item_sep = indent >= 0 ? "," : ", ";
  if (key_sep.empty()) key_sep = ": ";
  JsonWriter w{indent, sort_keys, ensure_ascii, item_sep, key_sep, Str()};
  w.write(v);
  return std::move(w.out);
}

}  // namespace tern::jinja
