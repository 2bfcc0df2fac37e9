// JSON Schema -> JsonGrammar. One pass over the schema; $refs are compiled
// once and memoized, so recursive schemas become cycles in the node graph.
#include "tern/sampling/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "json_shape.h"

namespace tern {
namespace {

using json = nlohmann::ordered_json;  // keeps the declared order of properties
using Kind = JsonNode::Kind;

constexpr int kMaxRefDepth = int(kMaxSchemaDepth) * 2;  // schemas inside schemas, $refs followed

[[noreturn]] void refuse(const std::string& keyword, const std::string& why) {
  throw SchemaError(keyword, "unsupported JSON schema keyword '" + keyword + "': " + why);
}
[[noreturn]] void malformed(const std::string& keyword, const std::string& why) {
  throw SchemaError(keyword, "invalid JSON schema at '" + keyword + "': " + why);
}

const std::set<std::string> kAnnotations = {"title",    "description", "default",  "examples",
                                            "$schema",  "$id",         "$comment", "deprecated",
                                            "readOnly", "writeOnly",   "strict"};
const std::set<std::string> kSupported = {"type",
                                          "nullable",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "enum",
                                          "const",
                                          "items",
                                          "prefixItems",
                                          "minItems",
                                          "maxItems",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "$ref",
                                          "$defs",
                                          "definitions",
                                          "minLength",
                                          "maxLength",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum"};

uint32_t to_u32(const json& v, const char* kw) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    malformed(kw, "expected a non-negative integer");
  return uint32_t(std::min<int64_t>(v.get<int64_t>(), std::numeric_limits<uint32_t>::max()));
}

class Compiler {
 public:
  Compiler(JsonGrammar& g, const json& root) : g_(g), root_(root) {}

  uint32_t compile(const json& s, int depth = 0) {
    // The text's nesting is bounded already (check_schema_shape), so only a
    // chain of $refs, each compiled inside the one before, can get this deep.
    if (depth > kMaxRefDepth)
      malformed("$ref", "references nest more than " + std::to_string(kMaxRefDepth) + " deep");
    if (s.is_boolean()) {
      if (!s.get<bool>()) refuse("false", "a 'false' schema matches nothing");
      return g_.any_value();
    }
    if (!s.is_object()) malformed("schema", "a schema must be an object or a boolean");
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!kAnnotations.count(it.key()) && !kSupported.count(it.key()))
        refuse(it.key(), "not enforced by the grammar");
    if (auto r = s.find("$ref"); r != s.end()) {
      for (auto it = s.begin(); it != s.end(); ++it)
        if (!kAnnotations.count(it.key()) && it.key() != "$ref" && it.key() != "$defs" &&
            it.key() != "definitions")
          refuse(it.key(), "keywords beside $ref are not supported");
      return ref(*r, depth);
    }
    if (auto a = s.find("allOf"); a != s.end()) {
      if (!a->is_array() || a->size() != 1)
        refuse("allOf", "only allOf with a single schema is supported");
      only_annotations_besides(s, "allOf");
      return compile((*a)[0], depth + 1);
    }
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (auto a = s.find(kw); a != s.end()) {
        if (!a->is_array() || a->empty()) malformed(kw, "expected a non-empty array of schemas");
        only_annotations_besides(s, kw);
        JsonNode u;
        for (const auto& sub : *a) u.alts.push_back(compile(sub, depth + 1));
        return g_.add(std::move(u));
      }
    }
    const bool nullable = s.value("nullable", false);
    std::vector<uint32_t> alts;
    if (auto c = s.find("const"); c != s.end()) {
      alts.push_back(literal(*c));
    } else if (auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array() || e->empty()) malformed("enum", "expected a non-empty array");
      for (const auto& v : *e) alts.push_back(literal(v));
    } else {
      for (const std::string& t : types(s)) alts.push_back(typed(s, t, depth));
    }
    if (nullable) alts.push_back(literal(nullptr));
    if (alts.size() == 1) return alts[0];
    JsonNode u;
    u.alts = std::move(alts);
    return g_.add(std::move(u));
  }

 private:
  void only_annotations_besides(const json& s, const char* kw) {
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!kAnnotations.count(it.key()) && it.key() != kw && it.key() != "$defs" &&
          it.key() != "definitions")
        refuse(it.key(), std::string("keywords beside ") + kw + " are not supported");
  }

  uint32_t literal(const json& v) {
    JsonNode n;
    n.kind = Kind::Literal;
    n.literal = v.dump();
    return g_.add(std::move(n));
  }

  // The types a schema allows: its "type", or what its keywords imply.
  std::vector<std::string> types(const json& s) {
    if (auto t = s.find("type"); t != s.end()) {
      std::vector<std::string> out;
      if (t->is_string()) {
        out.push_back(t->get<std::string>());
      } else if (t->is_array() && !t->empty()) {
        for (const auto& x : *t) {
          if (!x.is_string()) malformed("type", "expected a string or an array of strings");
          out.push_back(x.get<std::string>());
        }
      } else {
        malformed("type", "expected a string or an array of strings");
      }
      return out;
    }
    if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
      return {"object"};
    if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") ||
        s.contains("maxItems"))
      return {"array"};
    if (s.contains("minLength") || s.contains("maxLength")) return {"string"};
    if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
        s.contains("exclusiveMaximum"))
      return {"number"};
    return {"null", "boolean", "object", "array", "string", "number"};
  }

  uint32_t typed(const json& s, const std::string& t, int depth) {
    if (t == "null") return literal(nullptr);
    if (t == "boolean") {
      JsonNode u;
      u.alts = {literal(true), literal(false)};
      return g_.add(std::move(u));
    }
    if (t == "string") {
      JsonNode n;
      n.kind = Kind::String;
      if (auto v = s.find("minLength"); v != s.end()) n.min_len = to_u32(*v, "minLength");
      if (auto v = s.find("maxLength"); v != s.end()) n.max_len = to_u32(*v, "maxLength");
      if (n.min_len > n.max_len) malformed("minLength", "minLength is greater than maxLength");
      return g_.add(std::move(n));
    }
    if (t == "integer" || t == "number") return number(s, t == "integer");
    if (t == "array") return array(s, depth);
    if (t == "object") return object(s, depth);
    malformed("type", "unknown type '" + t + "'");
  }

  uint32_t number(const json& s, bool integer) {
    JsonNode n;
    n.kind = Kind::Number;
    n.integer = integer;
    auto num = [&](const char* kw, double& out) {
      auto v = s.find(kw);
      if (v == s.end()) return false;
      if (!v->is_number()) malformed(kw, "expected a number");
      out = v->get<double>();
      return true;
    };
    double x = 0;
    if (num("minimum", x)) n.lo = x;
    if (num("maximum", x)) n.hi = x;
    if (auto v = s.find("exclusiveMinimum"); v != s.end() && v->is_boolean()) {
      n.lo_excl = v->get<bool>();  // draft 4 form
    } else if (num("exclusiveMinimum", x) && x >= n.lo) {
      n.lo = x;
      n.lo_excl = true;
    }
    if (auto v = s.find("exclusiveMaximum"); v != s.end() && v->is_boolean()) {
      n.hi_excl = v->get<bool>();
    } else if (num("exclusiveMaximum", x) && x <= n.hi) {
      n.hi = x;
      n.hi_excl = true;
    }
    if (integer) {  // integer bounds become inclusive integers
      if (std::isfinite(n.lo)) n.lo = n.lo_excl ? std::floor(n.lo) + 1 : std::ceil(n.lo);
      if (std::isfinite(n.hi)) n.hi = n.hi_excl ? std::ceil(n.hi) - 1 : std::floor(n.hi);
      n.lo_excl = n.hi_excl = false;
      if ((std::isfinite(n.lo) && std::fabs(n.lo) > 1e15) ||
          (std::isfinite(n.hi) && std::fabs(n.hi) > 1e15))
        refuse("minimum", "integer bounds beyond 1e15 are not supported");
    }
    if (n.lo > n.hi || (n.lo == n.hi && (n.lo_excl || n.hi_excl)))
      malformed("minimum", "the range is empty");
    return g_.add(std::move(n));
  }

  uint32_t array(const json& s, int depth) {
    JsonNode n;
    n.kind = Kind::Array;
    if (auto v = s.find("prefixItems"); v != s.end()) {
      if (!v->is_array()) malformed("prefixItems", "expected an array of schemas");
      for (const auto& sub : *v) n.prefix.push_back(compile(sub, depth + 1));
    }
    if (auto v = s.find("items"); v != s.end()) {
      if (v->is_array()) refuse("items", "the array form of items (use prefixItems)");
      if (!(v->is_boolean() && !v->get<bool>())) n.items = compile(*v, depth + 1);
    } else {
      n.items = g_.any_value();
    }
    if (auto v = s.find("minItems"); v != s.end()) n.min_items = to_u32(*v, "minItems");
    if (auto v = s.find("maxItems"); v != s.end()) n.max_items = to_u32(*v, "maxItems");
    if (n.items == JsonNode::kNone)
      n.max_items = std::min<uint32_t>(n.max_items, uint32_t(n.prefix.size()));
    if (n.min_items > n.max_items)
      malformed("minItems", "minItems is greater than what the array can hold");
    return g_.add(std::move(n));
  }

  uint32_t object(const json& s, int depth) {
    JsonNode n;
    n.kind = Kind::Object;
    // Required properties first, in the order `required` lists them (it is an
    // array, so its order survives any JSON parser), then the optional ones
    // in declaration order.
    std::vector<std::string> order;
    if (auto v = s.find("required"); v != s.end()) {
      if (!v->is_array()) malformed("required", "expected an array of strings");
      for (const auto& k : *v) {
        if (!k.is_string()) malformed("required", "expected an array of strings");
        if (std::find(order.begin(), order.end(), k.get<std::string>()) == order.end())
          order.push_back(k.get<std::string>());
      }
    }
    const size_t n_required = order.size();
    const json no_props = json::object();
    auto pv = s.find("properties");
    if (pv != s.end() && !pv->is_object()) malformed("properties", "expected an object");
    const json& props = pv != s.end() ? *pv : no_props;
    for (size_t i = 0; i < n_required; ++i)
      if (!props.contains(order[i]))
        refuse("required", "required property '" + order[i] + "' is not declared in properties");
    for (auto it = props.begin(); it != props.end(); ++it)
      if (std::find(order.begin(), order.end(), it.key()) == order.end()) order.push_back(it.key());
    for (size_t i = 0; i < order.size(); ++i) {
      const std::string quoted = json(order[i]).dump();
      n.props.push_back({quoted.substr(1, quoted.size() - 2),
                         compile(props.at(order[i]), depth + 1), i < n_required});
    }
    if (auto v = s.find("additionalProperties"); v != s.end()) {
      if (!(v->is_boolean() && !v->get<bool>())) n.additional = compile(*v, depth + 1);
    } else {
      n.additional = g_.any_value();
    }
    build_key_trie(n);
    return g_.add(std::move(n));
  }

  static void build_key_trie(JsonNode& n) {
    n.keys.assign(1, {});
    for (size_t p = 0; p < n.props.size(); ++p) {
      uint32_t cur = 0;
      int pending = 0;  // bytes still inside an escape or a UTF-8 sequence
      bool escape = false;
      for (unsigned char c : n.props[p].key) {
        if (pending > 0) {
          --pending;
        } else if (escape) {
          pending = c == 'u' ? 4 : 0;
          escape = false;
        } else if (c == '\\') {
          escape = true;
        } else if (c >= 0xC0) {
          pending = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
        }
        n.keys[cur].subtree_props.push_back(uint32_t(p));
        auto& ch = n.keys[cur].children;
        auto f = std::find_if(ch.begin(), ch.end(), [&](const auto& e) { return e.first == c; });
        uint32_t next;
        if (f != ch.end()) {
          next = f->second;
        } else {
          next = uint32_t(n.keys.size());
          ch.push_back({c, next});
          JsonNode::KeyTrieNode k;
          k.parent = cur;
          k.byte = c;
          k.boundary = pending == 0 && !escape;
          n.keys.push_back(std::move(k));
        }
        cur = next;
      }
      n.keys[cur].subtree_props.push_back(uint32_t(p));
      n.keys[cur].prop = int32_t(p);
    }
  }

  uint32_t ref(const json& r, int depth) {
    if (!r.is_string()) malformed("$ref", "expected a string");
    const std::string path = r.get<std::string>();
    if (auto it = refs_.find(path); it != refs_.end()) return it->second;
    const json* target = nullptr;
    if (path == "#") {
      target = &root_;
    } else {
      for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
        const std::string p = prefix;
        if (path.rfind(p, 0) != 0) continue;
        const std::string section = p.substr(2, p.size() - 3);
        const std::string name = path.substr(p.size());
        auto sec = root_.find(section);
        if (sec != root_.end() && sec->is_object() && sec->contains(name)) target = &(*sec)[name];
      }
    }
    if (!target)
      refuse("$ref", "cannot resolve '" + path + "' (only #, #/$defs/NAME and #/definitions/NAME)");
    // A placeholder union with one alternative, filled once the target is
    // compiled: references inside the target (recursion) point to it.
    const uint32_t id = g_.add(JsonNode{});
    refs_[path] = id;
    const uint32_t body = compile(*target, depth + 1);
    g_.mut(id).alts = {body};
    return id;
  }

  JsonGrammar& g_;
  const json& root_;
  std::map<std::string, uint32_t> refs_;
};

}  // namespace

JsonGrammar::JsonGrammar() {
  JsonNode k;
  k.kind = Kind::String;
  key_string_ = add(std::move(k));
}

uint32_t JsonGrammar::add(JsonNode n) {
  nodes_.push_back(std::move(n));
  return uint32_t(nodes_.size() - 1);
}

uint32_t JsonGrammar::any_value() {
  if (any_ != JsonNode::kNone) return any_;
  any_ = add(JsonNode{});  // the union, filled below (objects and arrays refer back to it)
  const auto of = [](Kind k) {
    JsonNode n;
    n.kind = k;
    return n;
  };
  std::vector<uint32_t> alts;
  for (const char* lit : {"null", "true", "false"}) {
    JsonNode n = of(Kind::Literal);
    n.literal = lit;
    alts.push_back(add(std::move(n)));
  }
  alts.push_back(add(of(Kind::String)));
  alts.push_back(add(of(Kind::Number)));
  JsonNode arr = of(Kind::Array);
  arr.items = any_;
  alts.push_back(add(std::move(arr)));
  JsonNode obj = of(Kind::Object);
  obj.additional = any_;
  obj.keys.assign(1, {});
  alts.push_back(add(std::move(obj)));
  nodes_[any_].alts = std::move(alts);
  return any_;
}

std::shared_ptr<const JsonGrammar> JsonGrammar::from_schema(std::string_view schema_json) {
  check_schema_shape(schema_json);  // before parsing: see json_shape.h
  const json schema = parse_schema_text(schema_json);
  if (schema.is_discarded()) throw SchemaError("", "the JSON schema is not valid JSON");
  auto g = std::shared_ptr<JsonGrammar>(new JsonGrammar());
  Compiler c(*g, schema);
  try {
    g->set_root(c.compile(schema));
  } catch (const json::exception& e) {  // a keyword's value of the wrong JSON type
    throw SchemaError("", std::string("invalid JSON schema: ") + e.what());
  }
  return g;
}

std::shared_ptr<const JsonGrammar> JsonGrammar::any_object() {
  auto g = std::shared_ptr<JsonGrammar>(new JsonGrammar());
  const uint32_t any = g->any_value();
  g->set_root(g->node(any).alts.back());  // the object alternative
  return g;
}

}  // namespace tern
