// libFuzzer target for JSON-schema compilation (sampling/json_schema.cpp):
// nlohmann's parse of the text, then the compiler into the byte grammar that
// constrained decoding walks. Inputs over the server's default request body
// limit (1 MiB) are skipped, as the server would refuse them. Seeds:
// `fuzz_seeds json_schema DIR`; dictionary: fuzz/json_schema.dict. Every input
// must compile or be refused with SchemaError; a compiled grammar must only
// refer to nodes it has.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "tern/sampling/json_schema.h"

namespace {

using tern::JsonGrammar;
using tern::JsonNode;
using tern::fuzz::check;

constexpr size_t kBodyLimit = size_t(1) << 20;

void check_ref(const JsonGrammar& g, uint32_t id, bool may_be_none) {
  check(id < g.size() || (may_be_none && id == JsonNode::kNone));
}

void check_grammar(const JsonGrammar& g) {
  check(g.size() > 0);
  check_ref(g, g.root(), false);
  check_ref(g, g.key_string(), false);
  for (uint32_t i = 0; i < g.size(); ++i) {
    const JsonNode& n = g.node(i);
    for (uint32_t a : n.alts) check_ref(g, a, false);
    for (uint32_t p : n.prefix) check_ref(g, p, false);
    check_ref(g, n.items, true);
    check_ref(g, n.additional, true);
    check(n.min_len <= n.max_len || n.kind != JsonNode::Kind::String);
    for (const JsonNode::Property& p : n.props) check_ref(g, p.node, false);
    for (const JsonNode::KeyTrieNode& k : n.keys) {
      check(k.parent < n.keys.size() || n.keys.empty());
      check(k.prop < int32_t(n.props.size()));
      for (const auto& [byte, child] : k.children) check(child < n.keys.size());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kBodyLimit) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    check_grammar(*JsonGrammar::from_schema(text));
  } catch (const tern::SchemaError&) {
    // Refused cleanly.
  }
  return 0;
}
