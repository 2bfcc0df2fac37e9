// WordPiece ("bert") on a hand-made vocabulary stored as llama.cpp's
// converter stores BERT's: "▁" before word-initial pieces, "##" dropped from
// continuations, control tokens as they are. The ids of the generated
// encoders' vocabulary against the peer's are checked in
// tests/unit/engine/encoder_oracle_test.cpp (tests/fixtures/encoder_golden.json).
#include <gtest/gtest.h>

#include "tern/core/error.h"
#include "tern/tokenizer/tokenizer.h"
#include "tern/tokenizer/unicode.h"

namespace tern {
namespace {

const std::string kStart = "\xE2\x96\x81";  // ▁

// 0 [PAD] 1 [UNK] 2 [CLS] 3 [SEP] 4 [MASK], then the pieces below.
VocabSpec spec(bool lowercase) {
  VocabSpec s;
  s.model = "bert";
  s.tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  s.token_types = {3, 3, 3, 3, 3};
  for (const std::string w : {"the", "un", "play", "able", "cafe", ".", ",", "!", "$", "中", "文",
                              "hello", "Hello", "naive"}) {
    s.tokens.push_back(kStart + w);
    s.token_types.push_back(1);
  }
  for (const std::string p : {"able", "ing", "s", "a", "b"}) {  // "##able" ...
    s.tokens.push_back(p);
    s.token_types.push_back(1);
  }
  s.bos = 2;
  s.sep = 3;
  s.unk = 1;
  s.pad = 0;
  s.lowercase = lowercase;
  return s;
}

int32_t id(const Tokenizer& t, const std::string& text) {
  return *t.token_id(text);
}

TEST(Wpm, GreedyLongestMatchWithContinuations) {
  const Tokenizer t = Tokenizer::from_spec(spec(true));
  const int32_t cls = 2, sep = 3;
  // "unplayable": ▁un matches first, but no continuation piece starts with
  // "p", so the whole word is [UNK] (the pieces found so far are dropped).
  EXPECT_EQ(t.encode("unplayable", true, false), (std::vector<int32_t>{cls, 1, sep}));
  // "playable" -> ▁play ##able; "plays" -> ▁play ##s.
  EXPECT_EQ(t.encode("playable plays", false, false),
            (std::vector<int32_t>{id(t, kStart + "play"), id(t, "able"), id(t, kStart + "play"),
                                  id(t, "s")}));
}

TEST(Wpm, NormalisesAndSplits) {
  const Tokenizer t = Tokenizer::from_spec(spec(true));
  // Lowercased, accents stripped (É -> e, ï -> i), punctuation and CJK
  // split off as words of their own, whitespace of every kind collapsed.
  EXPECT_EQ(
      t.encode("  CAFÉ,\tnaïve!\n中文 ", false, false),
      (std::vector<int32_t>{id(t, kStart + "cafe"), id(t, kStart + ","), id(t, kStart + "naive"),
                            id(t, kStart + "!"), id(t, kStart + "中"), id(t, kStart + "文")}));
  // An ASCII symbol is its own word too; a control character is dropped.
  EXPECT_EQ(
      t.encode("$the\x01.", false, false),
      (std::vector<int32_t>{id(t, kStart + "$"), id(t, kStart + "the"), id(t, kStart + ".")}));
  // A word no piece starts is [UNK], whole.
  EXPECT_EQ(t.encode("the zebra", false, false), (std::vector<int32_t>{id(t, kStart + "the"), 1}));
}

TEST(Wpm, CaseKeptWithoutTheNormaliserKey) {
  // llama.cpp lowercases only when tokenizer.ggml.normalizer.lowercase says so.
  const Tokenizer t = Tokenizer::from_spec(spec(false));
  EXPECT_EQ(t.encode("Hello hello", false, false),
            (std::vector<int32_t>{id(t, kStart + "Hello"), id(t, kStart + "hello")}));
}

TEST(Wpm, ClsAndSepWrapTheTextAndSpecialsParse) {
  const Tokenizer t = Tokenizer::from_spec(spec(true));
  EXPECT_EQ(t.encode("the [MASK] the", true, true),
            (std::vector<int32_t>{2, id(t, kStart + "the"), 4, id(t, kStart + "the"), 3}));
  // Not parsed: "[", "mask" (unknown), "]".
  EXPECT_EQ(t.encode("[MASK]", false, false), (std::vector<int32_t>{1, 1, 1}));
  EXPECT_EQ(t.encode("", true, true), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(t.decode(t.encode("the cafe", false, false)), " the cafe");
}

TEST(Wpm, NeedsClsAndSep) {
  VocabSpec s = spec(true);
  s.sep = 99;  // out of range: ignored, so the default (102) is too
  s.tokens.resize(5);
  s.token_types.resize(5);
  EXPECT_THROW(Tokenizer::from_spec(s), FormatError);
}

TEST(Wpm, UnicodeCaseTables) {
  EXPECT_EQ(unicode::to_lower('A'), uint32_t('a'));
  EXPECT_EQ(unicode::to_lower(0x00C9), 0x00E9u);  // É -> é
  EXPECT_EQ(unicode::to_lower(0x0416), 0x0436u);  // Ж -> ж
  EXPECT_EQ(unicode::to_lower(0x4E2D), 0x4E2Du);  // 中 has no case
  EXPECT_EQ(unicode::nfd_base(0x00E9), uint32_t('e'));
  EXPECT_EQ(unicode::nfd_base(0x1EC7), uint32_t('e'));  // ệ
  EXPECT_EQ(unicode::nfd_base('e'), uint32_t('e'));
  EXPECT_EQ(unicode::nfd_base(0xAC00), 0x1100u);  // Hangul 가 -> ᄀ
}

}  // namespace
}  // namespace tern
