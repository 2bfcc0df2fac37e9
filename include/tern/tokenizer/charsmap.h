#pragma once
// SentencePiece's precompiled character map (tokenizer.ggml.precompiled_charsmap):
// the normalisation rules of a unigram ("t5") vocabulary, e.g. XLM-RoBERTa's
// NFKC-with-extras, as one binary blob:
//
//   u32 trie_bytes (little-endian)
//   u32 units[trie_bytes / 4]   a darts-clone double array, XOR-compressed:
//                               bits 0-7 the label that leads to the unit,
//                               bit 8 "has a value" (a child under label 0
//                               holds it), bits 10-30 the XOR offset to the
//                               children (shifted left by 8 when bit 9 is
//                               set); a value unit has bit 31 set and the
//                               replacement's offset in bits 0-30
//   char replacements[]         NUL-terminated UTF-8 strings
//
// The longest input prefix (in bytes) that spells a key is replaced by its
// string. parse() walks every node once and checks every offset, so lookups
// on a parsed map never read outside it.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tern {

class Charsmap {
 public:
  Charsmap() = default;  // empty: matches nothing

  // Validates the blob; throws FormatError "<key>: <what is wrong>" when a
  // size, unit or replacement offset does not fit (`key` names the blob).
  static Charsmap parse(std::string_view blob, std::string_view key);

  // Writes the blob for `rules` (key bytes -> replacement, keys non-empty
  // without NUL bytes and distinct, replacements without NUL bytes). For
  // generated test vocabularies.
  static std::string build(const std::vector<std::pair<std::string, std::string>>& rules);

  struct Match {
    std::string_view replacement;
    size_t consumed = 0;  // 0: no key is a prefix of the input
  };
  // The longest key that prefixes `input` (stopping at a NUL byte) and its
  // replacement.
  Match longest_prefix(std::string_view input) const;

  bool empty() const { return units_.empty(); }

 private:
  std::vector<uint32_t> units_;
  std::string replacements_;
};

}  // namespace tern
