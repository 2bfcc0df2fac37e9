#include "tern/tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "unicode_tables.h"

namespace tern::unicode {
namespace {

uint16_t lookup_table(uint32_t cp) {
  const auto* begin = detail::kCodepointRanges;
  const auto* end = begin + detail::kCodepointRangeCount;
  // Last range whose first codepoint is <= cp.
  const auto* it = std::upper_bound(
      begin, end, cp,
      [](uint32_t value, const detail::CodepointRange& r) { return value < r.first; });
  return it == begin ? static_cast<uint16_t>(kUndefined) : (it - 1)->flags;
}

const std::array<uint16_t, 128>& ascii_flags() {
  static const std::array<uint16_t, 128> table = [] {
    std::array<uint16_t, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = lookup_table(c);
    return t;
  }();
  return table;
}

}  // namespace

uint16_t flags(uint32_t cp) {
  if (cp < 128) return ascii_flags()[cp];
  if (cp >= 0x110000) return kUndefined;
  return lookup_table(cp);
}

uint32_t to_lower(uint32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
  const auto* end = detail::kLowercase + detail::kLowercaseCount;
  const auto* it = std::lower_bound(detail::kLowercase, end, cp,
                                    [](const detail::CasePair& p, uint32_t v) { return p.cp < v; });
  return it != end && it->cp == cp ? it->lower : cp;
}

uint32_t nfd_base(uint32_t cp) {
  if (cp < 0xC0) return cp;
  const auto* end = detail::kNfdRanges + detail::kNfdRangeCount;
  const auto* it =
      std::upper_bound(detail::kNfdRanges, end, cp,
                       [](uint32_t v, const detail::NfdRange& r) { return v < r.first; });
  if (it == detail::kNfdRanges) return cp;
  --it;
  return cp <= it->last ? it->base : cp;
}

const char* table_version() {
  return detail::kUnicodeVersion;
}

size_t utf8_len(uint8_t lead) {
  static constexpr size_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

std::vector<uint32_t> decode_utf8_lenient(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const auto cont = [&](size_t i) { return i < s.size() && (byte(i) & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t b = byte(i);
    if (b < 0x80) {
      out.push_back(b);
      i += 1;
    } else if ((b & 0xE0) == 0xC0 && cont(i + 1)) {
      out.push_back(((b & 0x1Fu) << 6) | (byte(i + 1) & 0x3Fu));
      i += 2;
    } else if ((b & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
      out.push_back(((b & 0x0Fu) << 12) | ((byte(i + 1) & 0x3Fu) << 6) | (byte(i + 2) & 0x3Fu));
      i += 3;
    } else if ((b & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      out.push_back(((b & 0x07u) << 18) | ((byte(i + 1) & 0x3Fu) << 12) |
                    ((byte(i + 2) & 0x3Fu) << 6) | (byte(i + 3) & 0x3Fu));
      i += 4;
    } else {
      out.push_back(kReplacementChar);
      i += 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

Utf8Step utf8_step(std::string_view s) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return {Utf8Step::kComplete, 1};
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return {Utf8Step::kInvalid, 1};
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= s.size()) return {Utf8Step::kTruncated, i};
    const auto b = static_cast<uint8_t>(s[i]);
    const uint8_t min = i == 1 ? lo : 0x80;
    const uint8_t max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) return {Utf8Step::kInvalid, i};
  }
  return {Utf8Step::kComplete, need};
}

bool is_valid_utf8(std::string_view s) {
  while (!s.empty()) {
    const Utf8Step step = utf8_step(s);
    if (step.kind != Utf8Step::kComplete) return false;
    s.remove_prefix(step.len);
  }
  return true;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const Utf8Step step = utf8_step(s);
    if (step.kind == Utf8Step::kComplete) {
      out.append(s.substr(0, step.len));
    } else {
      append_utf8(out, kReplacementChar);
    }
    s.remove_prefix(step.len);
  }
  return out;
}

}  // namespace tern::unicode
