// The precompiled charsmap (build, parse, longest-prefix lookup, corrupt
// blobs) and the unigram tokenizer's own rules on a hand-made vocabulary. The
// comparison with llama.cpp is ugm_golden_test.cpp.
#include <gtest/gtest.h>

#include <cstring>

#include "tern/core/error.h"
#include "tern/tokenizer/charsmap.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {
namespace {

const std::vector<std::pair<std::string, std::string>> kRules = {
    {"\xEF\xBC\xA1", "A"},                         // Ａ
    {"\xEF\xAC\x81", "fi"},                        // ﬁ
    {"e\xCC\x81", "\xC3\xA9"},                     // e + combining acute -> é
    {"\xEF\xBD\xB6", "\xE3\x82\xAB"},              // ｶ -> カ
    {"\xEF\xBD\xB6\xEF\xBE\x9E", "\xE3\x82\xAC"},  // ｶﾞ -> ガ
};

TEST(Charsmap, BuildThenLookUpLongestPrefix) {
  const Charsmap m = Charsmap::parse(Charsmap::build(kRules), "test");
  EXPECT_FALSE(m.empty());
  for (const auto& [key, repl] : kRules) {
    const Charsmap::Match got = m.longest_prefix(key + "tail");
    EXPECT_EQ(got.consumed, key.size()) << key;
    EXPECT_EQ(got.replacement, repl) << key;
  }
  EXPECT_EQ(m.longest_prefix("e").consumed, 0u);  // a key's prefix, no value of its own
  EXPECT_EQ(m.longest_prefix("ex").consumed, 0u);
  EXPECT_EQ(m.longest_prefix("").consumed, 0u);
  EXPECT_EQ(m.longest_prefix(std::string("\0e\xCC\x81", 4)).consumed, 0u);  // NUL stops it
  EXPECT_EQ(m.longest_prefix("\xEF\xBD\xB6\xEF").replacement, "\xE3\x82\xAB");
  EXPECT_EQ(Charsmap().longest_prefix("A").consumed, 0u);
}

void expect_format_error(const std::string& blob, const std::string& what) {
  try {
    Charsmap::parse(blob, "tokenizer.ggml.precompiled_charsmap");
    ADD_FAILURE() << "no error for " << what;
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.precompiled_charsmap"), std::string::npos)
        << e.what();
  }
}

uint32_t unit(const std::string& blob, size_t i) {
  uint32_t u;
  std::memcpy(&u, blob.data() + 4 + 4 * i, 4);
  return u;
}
void set_unit(std::string& blob, size_t i, uint32_t u) {
  std::memcpy(blob.data() + 4 + 4 * i, &u, 4);
}

TEST(Charsmap, CorruptBlobsAreFormatErrors) {
  const std::string good = Charsmap::build(kRules);
  uint32_t trie_bytes;
  std::memcpy(&trie_bytes, good.data(), 4);
  expect_format_error("", "empty");
  expect_format_error("\x01\x00", "short header");
  expect_format_error(good.substr(0, 4 + trie_bytes), "no replacements");
  expect_format_error(good.substr(0, 4 + trie_bytes / 2), "trie past the end");
  std::string odd = good;
  odd[0] = char(trie_bytes + 2);
  expect_format_error(odd, "size not a multiple of 4");
  std::string far = good;  // the root's children far past the array
  set_unit(far, 0, 0x1FFFFFu << 10);
  expect_format_error(far, "children past the array");
  // A value pointing past the replacements, or at a string with no NUL.
  const Charsmap::Match m = Charsmap::parse(good, "k").longest_prefix("\xEF\xBC\xA1");
  ASSERT_EQ(m.consumed, 3u);
  const size_t n_units = trie_bytes / 4;
  for (size_t i = 0; i < n_units; ++i) {
    if (!(unit(good, i) >> 31)) continue;  // value units only
    std::string bad = good;
    set_unit(bad, i, (1u << 31) | uint32_t(good.size()));
    expect_format_error(bad, "value past the replacements");
  }
  std::string unterminated = good;
  unterminated.back() = 'x';
  expect_format_error(unterminated, "unterminated replacement");
  EXPECT_NO_THROW(Charsmap::parse(good, "k"));
}

// 0 <s> 1 <pad> 2 </s> 3 <unk>, then scored pieces, a user-defined token.
VocabSpec spec() {
  VocabSpec s;
  s.model = "t5";
  const std::string sp = "\xE2\x96\x81";
  s.tokens = {"<s>", "<pad>", "</s>",   "<unk>", sp,   sp + "fine", "f", "i",
              "n",   "e",     sp + "f", "ine",   "fi", "<u>",       "A", sp + "A"};
  s.scores = {0, 0, 0, 0, -3, -4, -6, -6, -6, -6, -5, -5, -5, 0, -6, -5};
  s.token_types = {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1, 1};
  s.token_types[2] = 3;
  s.bos = 0;
  s.eos = 2;
  s.unk = 3;
  s.add_bos = true;
  s.add_space_prefix = true;
  s.remove_extra_whitespaces = true;
  s.precompiled_charsmap = Charsmap::build(kRules);
  return s;
}

TEST(Ugm, NormalisesThenPicksTheBestSegmentation) {
  const Tokenizer t = Tokenizer::from_spec(spec());
  // ﬁne -> "▁fine": one token (-4) beats ▁f + ine (-10) and the letters.
  EXPECT_EQ(t.encode("\xEF\xAC\x81ne", false, false), (std::vector<int32_t>{5}));
  // Full-width Ａ -> A; spaces collapse; <s> and </s> added.
  EXPECT_EQ(t.encode("  \xEF\xBC\xA1   A ", true, false), (std::vector<int32_t>{0, 15, 15, 2}));
  // Unknown characters: one <unk> for a run of them.
  EXPECT_EQ(t.encode("f\xF0\x9F\xA6\x8A\xF0\x9F\xA6\x8Ai", false, false),
            (std::vector<int32_t>{10, 3, 7}));
  // A user-defined token stays whole and unnormalised.
  EXPECT_EQ(t.encode("<u>fi", false, false), (std::vector<int32_t>{13, 4, 12}));
  EXPECT_EQ(t.decode(std::vector<int32_t>{5, 15}), "fine A");  // the first space dropped
}

TEST(Ugm, CorruptCharsmapNamesTheKey) {
  VocabSpec s = spec();
  s.precompiled_charsmap.resize(6);
  try {
    Tokenizer::from_spec(s, "model.gguf");
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("model.gguf: tokenizer.ggml.precompiled_charsmap"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tern
