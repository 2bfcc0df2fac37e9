#pragma once
// Private: the generated codepoint category table (unicode_tables.cpp).
#include <cstddef>
#include <cstdint>

namespace tern::unicode::detail {

struct CodepointRange {
  uint32_t first;  // first codepoint of the range; it ends where the next begins
  uint16_t flags;  // tern::unicode::Flag bits
};

struct CasePair {
  uint32_t cp, lower;
};
struct NfdRange {
  uint32_t first, last, base;
};

// unicode_case_tables.cpp (generated): for the WordPiece normaliser.
extern const CasePair kLowercase[];
extern const size_t kLowercaseCount;
extern const NfdRange kNfdRanges[];
extern const size_t kNfdRangeCount;

extern const char kUnicodeVersion[];
extern const CodepointRange kCodepointRanges[];
extern const size_t kCodepointRangeCount;

}  // namespace tern::unicode::detail
