#include "tern/tokenizer/unicode.h"

#include <gtest/gtest.h>

namespace tern::unicode {
namespace {

TEST(Unicode, CategoriesOfKnownCodepoints) {
  EXPECT_EQ(table_version(), std::string("15.1.0"));
  EXPECT_EQ(flags('a'), kLetter);
  EXPECT_EQ(flags('Z'), kLetter);
  EXPECT_EQ(flags('7'), kNumber);
  EXPECT_EQ(flags('!'), kPunctuation);
  EXPECT_EQ(flags('$'), kSymbol);
  EXPECT_EQ(flags(' '), kSeparator | kWhitespace);
  EXPECT_EQ(flags('\n'), kControl | kWhitespace);
  EXPECT_EQ(flags(0x00), kControl);
  EXPECT_EQ(flags(0x1C), kControl);                    // a C0 control that is not White_Space
  EXPECT_EQ(flags(0x00A0), kSeparator | kWhitespace);  // no-break space
  EXPECT_EQ(flags(0x0085), kControl | kWhitespace);    // next line
  EXPECT_EQ(flags(0x3000), kSeparator | kWhitespace);  // ideographic space
  EXPECT_EQ(flags(0x200B), kControl);                  // zero width space is Cf, not White_Space
  EXPECT_EQ(flags(0x0301), kMark);                     // combining acute
  EXPECT_EQ(flags(0x4E2D), kLetter);                   // 中
  EXPECT_EQ(flags(0x0661), kNumber);                   // Arabic-Indic one
  EXPECT_EQ(flags(0x00B2), kNumber);                   // superscript two
  EXPECT_EQ(flags(0x216B), kNumber);                   // roman numeral twelve (Nl)
  EXPECT_EQ(flags(0x1F600), kSymbol);                  // 😀
  EXPECT_EQ(flags(0x1F1FA), kSymbol);                  // regional indicator
  EXPECT_EQ(flags(0x200D), kControl);                  // zero width joiner
  EXPECT_EQ(flags(0xE000), kControl);                  // private use
  EXPECT_EQ(flags(0xD800), kControl);                  // surrogate
  EXPECT_EQ(flags(0x0378), kUndefined);                // unassigned
  EXPECT_EQ(flags(0x2EBF0), kLetter);                  // CJK Extension I (new in Unicode 15.1)
  EXPECT_EQ(flags(0x1C89), kUndefined);                // assigned only in Unicode 16
  EXPECT_EQ(flags(0x10FFFF), kUndefined);
  EXPECT_EQ(flags(0x110000), kUndefined);
}

TEST(Unicode, LenientDecodeReplacesEachBadByte) {
  EXPECT_EQ(decode_utf8_lenient("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  EXPECT_EQ(decode_utf8_lenient("\xF0\x9F\x98\x80"), (std::vector<uint32_t>{0x1F600}));
  // A lone continuation byte, a truncated 3-byte sequence, an invalid lead byte.
  EXPECT_EQ(decode_utf8_lenient("\x80x\xE2\x82y\xFF"),
            (std::vector<uint32_t>{0xFFFD, 'x', 0xFFFD, 0xFFFD, 'y', 0xFFFD}));
  // Overlong forms decode (as in llama.cpp), they are not rejected.
  EXPECT_EQ(decode_utf8_lenient("\xC0\x80"), (std::vector<uint32_t>{0}));
  EXPECT_TRUE(decode_utf8_lenient("").empty());
}

TEST(Unicode, AppendUtf8RoundTrips) {
  for (uint32_t cp : {0x0u, 0x41u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    append_utf8(s, cp);
    EXPECT_EQ(decode_utf8_lenient(s), std::vector<uint32_t>{cp}) << cp;
    EXPECT_TRUE(is_valid_utf8(s) || (cp >= 0xD800 && cp <= 0xDFFF)) << cp;
  }
}

TEST(Unicode, StrictStepClassifiesSequences) {
  using K = Utf8Step::Kind;
  const auto step = [](std::string_view s) { return utf8_step(s); };
  EXPECT_EQ(step("a").kind, K::kComplete);
  EXPECT_EQ(step("\xC3\xA9").len, 2u);
  EXPECT_EQ(step("\xF0\x9F\x98\x80").len, 4u);
  EXPECT_EQ(step("\xF0\x9F\x98").kind, K::kTruncated);
  EXPECT_EQ(step("\xF0\x9F\x98").len, 3u);
  EXPECT_EQ(step("\xE2").kind, K::kTruncated);
  EXPECT_EQ(step("\x80").kind, K::kInvalid);
  EXPECT_EQ(step("\xC0\x80").kind, K::kInvalid);          // overlong
  EXPECT_EQ(step("\xE0\x80\x80").kind, K::kInvalid);      // overlong
  EXPECT_EQ(step("\xED\xA0\x80").kind, K::kInvalid);      // surrogate
  EXPECT_EQ(step("\xF4\x90\x80\x80").kind, K::kInvalid);  // > U+10FFFF
  EXPECT_EQ(step("\xF5").kind, K::kInvalid);
  const Utf8Step broken = step("\xE2\x82x");  // lead + continuation, then a non-continuation
  EXPECT_EQ(broken.kind, K::kInvalid);
  EXPECT_EQ(broken.len, 2u);
}

TEST(Unicode, SanitizeAndValidate) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("héllo 中文 😀"));
  EXPECT_FALSE(is_valid_utf8("\xF0\x9F\x98"));
  EXPECT_FALSE(is_valid_utf8("\xFF"));
  EXPECT_EQ(sanitize_utf8("ok"), "ok");
  EXPECT_EQ(sanitize_utf8("a\xFF"
                          "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(sanitize_utf8("a\xE2\x82"), "a\xEF\xBF\xBD");
  EXPECT_EQ(sanitize_utf8("\xE2\x82x"), "\xEF\xBF\xBDx");
  EXPECT_TRUE(is_valid_utf8(sanitize_utf8("\x80\xC3\xF0\x9F\x98\x80\xED\xA0\x80")));
}

}  // namespace
}  // namespace tern::unicode
