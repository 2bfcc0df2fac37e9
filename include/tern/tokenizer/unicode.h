#pragma once
// Unicode helpers for the tokenizer: codepoint categories (from a table generated
// out of the Unicode database, see scripts/gen_unicode_tables.py), UTF-8 decoding
// the way llama.cpp does it, and strict UTF-8 scanning for streaming output.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern::unicode {

// Category flags of one codepoint. Exactly one of the first eight is set
// (the general category); kWhitespace is the White_Space property.
enum Flag : uint16_t {
  kUndefined = 0x0001,    // Cn: unassigned
  kNumber = 0x0002,       // \p{N}
  kLetter = 0x0004,       // \p{L}
  kSeparator = 0x0008,    // \p{Z}
  kMark = 0x0010,         // \p{M}
  kPunctuation = 0x0020,  // \p{P}
  kSymbol = 0x0040,       // \p{S}
  kControl = 0x0080,      // \p{C} other than Cn
  kWhitespace = 0x0100,   // \s
};

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Flags of cp; codepoints past U+10FFFF are kUndefined.
uint16_t flags(uint32_t cp);
inline bool is_letter(uint32_t cp) {
  return flags(cp) & kLetter;
}
inline bool is_number(uint32_t cp) {
  return flags(cp) & kNumber;
}
inline bool is_whitespace(uint32_t cp) {
  return flags(cp) & kWhitespace;
}

// The simple lowercase mapping of cp (cp itself when it has none).
uint32_t to_lower(uint32_t cp);
// The first codepoint of cp's canonical decomposition (NFD): 'e' for U+00E9;
// cp itself when it does not decompose. (llama.cpp's "NFD" for BERT's
// accent stripping is this one-to-one map; the marks NFD would add are the
// ones the stripping drops anyway.)
uint32_t nfd_base(uint32_t cp);

// The Unicode version the category table was generated from, e.g. "15.1.0".
const char* table_version();

// Byte length of a UTF-8 sequence from its lead byte (1 for continuation bytes).
size_t utf8_len(uint8_t lead);

// Decodes UTF-8 like llama.cpp: a lead byte followed by the right number of
// continuation bytes yields a codepoint (overlong forms are not rejected); any
// other byte yields U+FFFD and decoding resumes at the next byte.
std::vector<uint32_t> decode_utf8_lenient(std::string_view s);

// Appends the UTF-8 encoding of cp (cp <= U+10FFFF).
void append_utf8(std::string& out, uint32_t cp);

// Strict UTF-8 (RFC 3629: no overlongs, no surrogates, <= U+10FFFF), one step.
struct Utf8Step {
  enum Kind { kComplete, kTruncated, kInvalid };
  Kind kind;
  size_t len;  // kComplete: sequence length; kTruncated: bytes present; kInvalid: bytes to drop
};
// Classifies the sequence starting at s[0] (s must not be empty): kComplete for a
// well-formed sequence, kTruncated when s ends inside a sequence that could still
// become well-formed, kInvalid for a maximal prefix that never can.
Utf8Step utf8_step(std::string_view s);

bool is_valid_utf8(std::string_view s);
// Replaces every ill-formed or truncated part of s by U+FFFD.
std::string sanitize_utf8(std::string_view s);

}  // namespace tern::unicode
