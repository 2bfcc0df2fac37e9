#pragma once
// Private: the generated codepoint category table (unicode_tables.cpp).
#include <cstddef>
#include <cstdint>

namespace tern::unicode::detail {

struct CodepointRange {
  uint32_t first;  // first codepoint of the range; it ends where the next begins
  uint16_t flags;  // tern::unicode::Flag bits
};

extern const char kUnicodeVersion[];
extern const CodepointRange kCodepointRanges[];
extern const size_t kCodepointRangeCount;

}  // namespace tern::unicode::detail
