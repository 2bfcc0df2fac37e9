// SentencePiece's precompiled character map: parsing (every node and offset
// checked once), longest-prefix lookup as llama.cpp's UGM normaliser walks
// it, and a builder for generated vocabularies (charsmap.h).
#include "tern/tokenizer/charsmap.h"

#include <cstring>
#include <deque>
#include <map>

#include "tern/core/error.h"

namespace tern {
namespace {

constexpr uint32_t kValueBit = 1u << 31;
constexpr uint32_t kLeafBit = 1u << 8;

// A unit's fields (see charsmap.h).
uint64_t unit_base(uint32_t u) {
  return uint64_t(u >> 10) << ((u & (1u << 9)) >> 6);
}
uint32_t unit_label(uint32_t u) {
  return u & (kValueBit | 0xFF);  // a value unit never equals a label
}
bool unit_has_value(uint32_t u) {
  return u & kLeafBit;
}
uint32_t unit_value(uint32_t u) {
  return u & (kValueBit - 1);
}

uint32_t read_le32(const char* p) {
  const auto* b = reinterpret_cast<const uint8_t*>(p);
  return uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 | uint32_t(b[3]) << 24;
}

void append_le32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xFF));
}

}  // namespace

Charsmap Charsmap::parse(std::string_view blob, std::string_view key) {
  const auto fail = [&](const std::string& what) {
    throw FormatError(std::string(key) + ": " + what);
  };
  if (blob.size() < 4)
    fail("too short for its 4-byte trie size (" + std::to_string(blob.size()) + " bytes)");
  const uint64_t trie_bytes = read_le32(blob.data());
  if (trie_bytes % 4 != 0)
    fail("trie size " + std::to_string(trie_bytes) + " is not a multiple of 4");
  if (trie_bytes + 4 >= blob.size())
    fail("trie of " + std::to_string(trie_bytes) + " bytes leaves no replacement strings in " +
         std::to_string(blob.size()) + " bytes");
  Charsmap m;
  m.units_.resize(size_t(trie_bytes / 4));
  for (size_t i = 0; i < m.units_.size(); ++i) m.units_[i] = read_le32(blob.data() + 4 + 4 * i);
  m.replacements_.assign(blob.substr(4 + size_t(trie_bytes)));
  if (m.units_.empty()) return m;

  // Walk every node once: its 255 possible children must lie in the array,
  // and every value must start a NUL-terminated replacement.
  const uint64_t n = m.units_.size();
  std::vector<bool> seen(n, false);
  std::vector<uint64_t> todo{unit_base(m.units_[0])};
  while (!todo.empty()) {
    const uint64_t at = todo.back();
    todo.pop_back();
    if ((at | 0xFF) >= n)
      fail("a node's children at unit " + std::to_string(at) + " lie past the trie's " +
           std::to_string(n) + " units");
    if (seen[at]) continue;
    seen[at] = true;
    for (uint32_t c = 1; c < 256; ++c) {
      const uint32_t u = m.units_[at ^ c];
      if (unit_label(u) != c) continue;
      const uint64_t child = (at ^ c) ^ unit_base(u);
      if (unit_has_value(u)) {
        if (child >= n) fail("a value unit " + std::to_string(child) + " lies past the trie");
        const uint32_t off = unit_value(m.units_[child]);
        if (off >= m.replacements_.size() || m.replacements_.find('\0', off) == std::string::npos)
          fail("replacement offset " + std::to_string(off) +
               " is not a NUL-terminated string within the " +
               std::to_string(m.replacements_.size()) + " bytes of replacements");
      }
      todo.push_back(child);
    }
  }
  return m;
}

Charsmap::Match Charsmap::longest_prefix(std::string_view input) const {
  Match best;
  if (units_.empty()) return best;
  const uint64_t n = units_.size();
  uint64_t at = unit_base(units_[0]);
  for (size_t i = 0; i < input.size(); ++i) {
    const auto c = uint8_t(input[i]);
    if (c == 0) break;
    const uint64_t idx = at ^ c;
    if (idx >= n || unit_label(units_[idx]) != c) break;
    const bool has_value = unit_has_value(units_[idx]);
    at = idx ^ unit_base(units_[idx]);
    if (has_value && at < n) {
      const uint32_t off = unit_value(units_[at]);
      if (off >= replacements_.size()) break;  // parse() rules this out
      const size_t end = replacements_.find('\0', off);
      if (end == std::string::npos) break;
      best.replacement = std::string_view(replacements_).substr(off, end - off);
      best.consumed = i + 1;
    }
  }
  return best;
}

std::string Charsmap::build(const std::vector<std::pair<std::string, std::string>>& rules) {
  // The byte trie of the keys; node 0 is the root.
  struct Node {
    std::map<uint8_t, int> children;
    int64_t value = -1;  // offset of the replacement
    uint64_t pos = 0;    // its unit
  };
  std::vector<Node> nodes(1);
  std::string strings;
  for (const auto& [key, repl] : rules) {
    if (key.empty() || key.find('\0') != std::string::npos || repl.find('\0') != std::string::npos)
      throw InvalidArgument("charsmap rule keys must be non-empty; neither side may hold NUL");
    int at = 0;
    for (char ch : key) {
      const auto c = uint8_t(ch);
      auto it = nodes[size_t(at)].children.find(c);
      if (it == nodes[size_t(at)].children.end()) {
        nodes.push_back({});
        it = nodes[size_t(at)].children.emplace(c, int(nodes.size() - 1)).first;
      }
      at = it->second;
    }
    if (nodes[size_t(at)].value >= 0) throw InvalidArgument("duplicate charsmap key");
    nodes[size_t(at)].value = int64_t(strings.size());
    strings += repl;
    strings.push_back('\0');
  }

  // Place each node's children (and its value, under label 0) at an offset
  // of its own, breadth first; the array grows in blocks of 256 units.
  std::vector<uint32_t> units(256, 0);
  std::vector<bool> used(256, false), offset_taken(256, false);
  used[0] = true;  // the root
  std::deque<int> queue{0};
  while (!queue.empty()) {
    Node& node = nodes[size_t(queue.front())];
    queue.pop_front();
    uint64_t off = 1;
    for (;; ++off) {
      if ((off | 0xFF) >= units.size()) {
        units.resize(units.size() + 256, 0);
        used.resize(units.size(), false);
        offset_taken.resize(units.size(), false);
      }
      if (offset_taken[off] || (node.value >= 0 && used[off])) continue;
      bool free = true;
      for (const auto& [c, child] : node.children) free = free && !used[off ^ c];
      if (free) break;
    }
    offset_taken[off] = true;
    const uint64_t rel = node.pos ^ off;
    if (rel >= (1u << 21)) throw InvalidArgument("charsmap too large for unshifted offsets");
    units[node.pos] |= uint32_t(rel) << 10;
    if (node.value >= 0) {
      used[off] = true;
      units[off] = kValueBit | uint32_t(node.value);
    }
    for (const auto& [c, child] : node.children) {
      Node& ch = nodes[size_t(child)];
      ch.pos = off ^ c;
      used[ch.pos] = true;
      units[ch.pos] = c | (ch.value >= 0 ? kLeafBit : 0);
      queue.push_back(child);
    }
  }
  std::string blob;
  append_le32(blob, uint32_t(units.size() * 4));
  for (uint32_t u : units) append_le32(blob, u);
  return blob + strings;
}

}  // namespace tern
