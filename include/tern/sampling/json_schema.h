#pragma once
// A JSON Schema compiled into a grammar over bytes: a graph of value nodes
// (object, array, string, number, literal, union) that JsonMatcher walks one
// byte at a time. Output is compact JSON (no whitespace between tokens) and
// object properties come in a fixed order: the required ones as `required`
// lists them, then the optional ones as `properties` declares them (each may
// be skipped); extra keys, where allowed, come last. Nothing here knows about
// tokens or HTTP.
//
// Supported keywords: type (one or a list; "null", "boolean", "object",
// "array", "string", "integer", "number"), nullable, properties, required,
// additionalProperties (bool or schema), enum, const, items (schema or bool),
// prefixItems, minItems, maxItems, anyOf, oneOf (enforced as anyOf: the output
// satisfies at least one branch), allOf with a single schema, $ref to "#",
// "#/$defs/..." or "#/definitions/..." (recursive references included),
// minLength, maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum
// (numbers with a range are written without an exponent), and the
// annotations title, description, default, examples, $schema, $id, $comment,
// deprecated, readOnly, writeOnly. Any other keyword is refused with a
// SchemaError naming it (pattern, format, multipleOf, uniqueItems, ...).
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tern/core/error.h"

namespace tern {

// A schema that cannot be compiled; keyword() names the offending keyword (or
// "" when the schema is not JSON / not a schema at all).
class SchemaError : public InvalidArgument {
 public:
  SchemaError(std::string keyword, const std::string& what)
      : InvalidArgument(what), keyword_(std::move(keyword)) {}
  const std::string& keyword() const { return keyword_; }

 private:
  std::string keyword_;
};

struct JsonNode {
  enum class Kind : uint8_t { Object, Array, String, Number, Literal, Union };
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

  Kind kind = Kind::Union;
  // Union: the alternatives (possibly unions too: the matcher expands them
  // when a value starts; a $ref is a one-alternative union).
  std::vector<uint32_t> alts;
  // Literal: the exact bytes (a JSON value in compact form).
  std::string literal;
  // String: length bounds in code points.
  uint32_t min_len = 0, max_len = std::numeric_limits<uint32_t>::max();
  // Number: integer only?; bounds (infinite: none).
  bool integer = false;
  bool lo_excl = false, hi_excl = false;
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool bounded() const { return std::isfinite(lo) || std::isfinite(hi); }
  // Array: prefixItems, then `items` for the rest (kNone: no more items).
  std::vector<uint32_t> prefix;
  uint32_t items = kNone;
  uint32_t min_items = 0, max_items = std::numeric_limits<uint32_t>::max();
  // Object: declared properties in order, extra keys' value schema (kNone:
  // additionalProperties false), and a byte trie of the escaped keys.
  struct Property {
    std::string key;  // JSON-escaped, without the quotes
    uint32_t node;
    bool required;
  };
  std::vector<Property> props;
  uint32_t additional = kNone;
  struct KeyTrieNode {
    uint32_t parent = 0;
    uint8_t byte = 0;
    bool boundary = true;  // not inside an escape or a UTF-8 sequence
    int32_t prop = -1;     // the property whose key ends here
    std::vector<std::pair<uint8_t, uint32_t>> children;
    std::vector<uint32_t> subtree_props;  // sorted property indices below
  };
  std::vector<KeyTrieNode> keys;  // keys[0] is the root
};

class JsonGrammar {
 public:
  // Compiles a JSON Schema given as JSON text. Throws SchemaError.
  static std::shared_ptr<const JsonGrammar> from_schema(std::string_view schema_json);
  // Any JSON object (response_format json_object).
  static std::shared_ptr<const JsonGrammar> any_object();

  const JsonNode& node(uint32_t id) const { return nodes_[id]; }
  uint32_t root() const { return root_; }
  uint32_t key_string() const { return key_string_; }  // unbounded string, for extra keys
  size_t size() const { return nodes_.size(); }

  // Used by the compiler.
  uint32_t add(JsonNode n);
  JsonNode& mut(uint32_t id) { return nodes_[id]; }
  void set_root(uint32_t r) { root_ = r; }
  uint32_t any_value();  // lazily built union of every JSON value

 private:
  JsonGrammar();
  std::vector<JsonNode> nodes_;
  uint32_t root_ = 0;
  uint32_t key_string_ = 0;
  uint32_t any_ = JsonNode::kNone;
};

}  // namespace tern
