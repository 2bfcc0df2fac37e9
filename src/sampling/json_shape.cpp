#include "json_shape.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "tern/sampling/json_schema.h"

namespace tern {
namespace {

struct Level {
  bool object = false;
  std::string_view key;  // object: the current key, as written (escapes kept)
  size_t index = 0;      // array: the current item; object: keys so far
};

bool plain_key(std::string_view k) {
  if (k.empty() || (k[0] >= '0' && k[0] <= '9')) return false;
  for (char c : k)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '$'))
      return false;
  return true;
}

// "$.a.items[0][\"x y\"]", shortened in the middle when long.
std::string path_text(const std::vector<Level>& stack, size_t n) {
  std::string out = "$";
  for (size_t i = 0; i < n; ++i) {
    const Level& l = stack[i];
    if (!l.object) {
      out += "[" + std::to_string(l.index) + "]";
    } else if (plain_key(l.key)) {
      out += "." + std::string(l.key.substr(0, 64));
    } else {  // still JSON-escaped: no control bytes
      out += "[\"" + std::string(l.key.substr(0, 64)) + (l.key.size() > 64 ? "...\"]" : "\"]");
    }
  }
  if (out.size() > 240) out = out.substr(0, 100) + "..." + out.substr(out.size() - 100);
  return out;
}

[[noreturn]] void too_big(const std::vector<Level>& stack, size_t n, const std::string& why) {
  throw SchemaError("", "invalid JSON schema at '" + path_text(stack, n) + "': " + why);
}

}  // namespace

void check_schema_shape(std::string_view text) {
  std::vector<Level> stack;
  size_t values = 0;
  bool value_next = true;  // the next token starts a value (not a key)
  auto count_value = [&] {
    if (++values > kMaxSchemaValues)
      too_big(stack, stack.size(),
              "the schema has more than " + std::to_string(kMaxSchemaValues) + " values");
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (c) {
      case '"': {
        const size_t start = ++i;
        while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
        const std::string_view s = text.substr(start, std::min(i, text.size()) - start);
        if (!value_next && !stack.empty() && stack.back().object) {
          Level& top = stack.back();
          top.key = s;
          if (++top.index > kMaxSchemaKeys)
            too_big(stack, stack.size() - 1,
                    "an object has more than " + std::to_string(kMaxSchemaKeys) + " keys");
        } else {
          count_value();
        }
        value_next = false;
        break;
      }
      case '{':
      case '[':
        count_value();
        if (stack.size() >= kMaxSchemaDepth)
          too_big(stack, stack.size(),
                  "the schema nests objects and arrays more than " +
                      std::to_string(kMaxSchemaDepth) + " levels deep");
        stack.push_back({c == '{', {}, 0});
        value_next = c == '[';
        break;
      case '}':
      case ']':
        if (!stack.empty()) stack.pop_back();
        value_next = false;
        break;
      case ',':
        if (!stack.empty() && !stack.back().object) ++stack.back().index;
        value_next = stack.empty() || !stack.back().object;
        break;
      case ':':
        value_next = true;
        break;
      case ' ':
      case '\t':
      case '\n':
      case '\r':
        break;
      default:  // a number, true, false or null: count it once, at its first byte
        if (value_next) count_value();
        value_next = false;
    }
  }
}

}  // namespace tern

namespace tern {
namespace {

using ojson = nlohmann::ordered_json;

// nlohmann's SAX interface, building each container only once it is complete.
class LinearBuilder {
 public:
  struct Frame {
    bool object = false;
    std::vector<std::pair<std::string, ojson>> members;
    std::vector<ojson> items;
    std::string key;
  };

  bool null() { return add(ojson(nullptr)); }
  bool boolean(bool v) { return add(ojson(v)); }
  bool number_integer(int64_t v) { return add(ojson(v)); }
  bool number_unsigned(uint64_t v) { return add(ojson(v)); }
  bool number_float(double v, const std::string&) { return add(ojson(v)); }
  bool string(std::string& v) { return add(ojson(std::move(v))); }
  bool binary(ojson::binary_t& v) { return add(ojson::binary(std::move(v))); }
  bool start_object(size_t) { return push(true); }
  bool start_array(size_t) { return push(false); }
  bool key(std::string& k) {
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_array() {
    ojson a = ojson::array();
    a.get_ref<ojson::array_t&>() = std::move(stack_.back().items);
    stack_.pop_back();
    return add(std::move(a));
  }
  bool end_object() {
    Frame& f = stack_.back();
    ojson o = ojson::object();
    auto& m = o.get_ref<ojson::object_t&>();
    m.reserve(f.members.size());                      // no growth: no member is copied
    std::unordered_map<std::string_view, size_t> at;  // views of m's keys (m never moves)
    at.reserve(f.members.size());
    for (auto& [k, v] : f.members) {
      if (auto it = at.find(k); it != at.end()) {
        (m.begin() + ptrdiff_t(it->second))->second = std::move(v);  // the last value wins
        continue;
      }
      m.emplace_back(std::move(k), std::move(v));
      at.emplace(m.back().first, m.size() - 1);
    }
    stack_.pop_back();
    return add(std::move(o));
  }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

  ojson result;

 private:
  bool push(bool object) {
    stack_.emplace_back();
    stack_.back().object = object;
    return true;
  }
  bool add(ojson v) {
    if (stack_.empty()) {
      result = std::move(v);
    } else if (stack_.back().object) {
      stack_.back().members.emplace_back(std::move(stack_.back().key), std::move(v));
    } else {
      stack_.back().items.push_back(std::move(v));
    }
    return true;
  }
  std::vector<Frame> stack_;
};

}  // namespace

ojson parse_schema_text(std::string_view text) {
  LinearBuilder b;
  if (!ojson::sax_parse(text, &b)) return ojson(ojson::value_t::discarded);
  return std::move(b.result);
}

}  // namespace tern
