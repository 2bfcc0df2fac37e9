#include "tern/tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "tern/tokenizer/unicode.h"

namespace tern {
namespace {

using Words = std::vector<std::string>;

TEST(PreTokenizer, NamesMapToKindsAndFlags) {
  const auto smollm = pre_tokenizer_by_name("smollm");
  ASSERT_TRUE(smollm);
  EXPECT_EQ(smollm->kind, PreTokenizerKind::kSmolLM);
  EXPECT_FALSE(smollm->clean_spaces);
  const auto llama3 = pre_tokenizer_by_name("llama-bpe");
  ASSERT_TRUE(llama3);
  EXPECT_EQ(llama3->kind, PreTokenizerKind::kLlama3);
  EXPECT_TRUE(llama3->ignore_merges);
  EXPECT_TRUE(llama3->add_bos);
  EXPECT_EQ(pre_tokenizer_by_name("qwen2")->kind, PreTokenizerKind::kQwen2);
  EXPECT_EQ(pre_tokenizer_by_name("gpt-2")->kind, PreTokenizerKind::kGpt2);
  EXPECT_EQ(pre_tokenizer_by_name("default")->kind, PreTokenizerKind::kDefault);
  EXPECT_TRUE(pre_tokenizer_by_name("gpt-2")->clean_spaces);
  EXPECT_FALSE(pre_tokenizer_by_name("no-such-thing").has_value());
  EXPECT_EQ(pre_tokenizer_name(PreTokenizerKind::kLlama3), "llama3");
}

TEST(PreTokenizer, Gpt2Words) {
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kGpt2, "Hello world's  end "),
            (Words{"Hello", " world", "'s", " ", " end", " "}));
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kGpt2, "x=12.5!!"),
            (Words{"x", "=", "12", ".", "5", "!!"}));
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kGpt2, "DON'T"),
            (Words{"DON", "'", "T"}));  // case-sensitive
  EXPECT_TRUE(pre_tokenize(PreTokenizerKind::kGpt2, "").empty());
}

TEST(PreTokenizer, SmolLMSplitsEveryDigit) {
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kSmolLM, "a12b ٣4"),
            (Words{"a", "1", "2", "b", " ", "٣", "4"}));
}

TEST(PreTokenizer, Llama3AndQwen2) {
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kLlama3, "12345"), (Words{"123", "45"}));
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kQwen2, "12345"), (Words{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kLlama3, "  \n  hello"), (Words{"  \n", " ", " hello"}));
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kLlama3, "DON'T"),
            (Words{"DON", "'T"}));  // case-insensitive
  EXPECT_EQ(pre_tokenize(PreTokenizerKind::kLlama3, "(x)\n\ny"), (Words{"(x", ")\n\n", "y"}));
}

TEST(PreTokenizer, WordsConcatenateToTheRepairedInput) {
  std::mt19937 rng(42);
  const std::vector<std::string> pieces = {
      "a", "Z",  "9", " ",      "  ",     "\t", "\n", "\r\n", ".",    "'s",      "'LL",
      "é", "中", "😀", "\u0301", "\u00a0", "١",  "$",  "<",    "\xFF", "\xE2\x82"};
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
    std::string repaired;
    for (uint32_t cp : unicode::decode_utf8_lenient(text)) unicode::append_utf8(repaired, cp);
    for (auto kind :
         {PreTokenizerKind::kDefault, PreTokenizerKind::kGpt2, PreTokenizerKind::kSmolLM,
          PreTokenizerKind::kLlama3, PreTokenizerKind::kQwen2}) {
      std::string joined;
      for (const std::string& w : pre_tokenize(kind, text)) {
        EXPECT_FALSE(w.empty());
        joined += w;
      }
      EXPECT_EQ(joined, repaired) << pre_tokenizer_name(kind);
    }
  }
}

}  // namespace
}  // namespace tern
