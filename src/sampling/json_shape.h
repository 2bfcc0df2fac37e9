#pragma once
// A JSON Schema's text: bounded, then parsed in linear time.
//
// Why not ordered_json::parse: nlohmann's ordered_map is a vector of
// pair<const key, value>, which cannot be moved without a possible throw, so
// every time an object grows the vector copies each earlier member's whole
// subtree; nested schemas cost depth^3 (1,000 levels 0.5 s, 5,000 levels
// 50 s), and a 97 kB schema 64 levels deep took 7 s. parse_schema_text builds
// each object once, from its finished members, into reserved space.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

namespace tern {

constexpr size_t kMaxSchemaDepth = 64;       // nested objects and arrays
constexpr size_t kMaxSchemaValues = 50'000;  // values of every kind, keys not counted
constexpr size_t kMaxSchemaKeys = 5'000;     // keys of one object

// Throws SchemaError naming the JSON path of the first node past a bound
// ("$.properties.a.items[2]"). Text that is not JSON passes: the parser says
// what is wrong with it.
void check_schema_shape(std::string_view text);

// The JSON text as ordered_json (members in document order; a repeated key
// keeps its first place and its last value), in time linear in its size.
// A value that is discarded() when the text is not JSON.
nlohmann::ordered_json parse_schema_text(std::string_view text);

}  // namespace tern
