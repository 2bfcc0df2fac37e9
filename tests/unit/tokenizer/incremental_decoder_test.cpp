#include "tern/tokenizer/incremental_decoder.h"

#include <gtest/gtest.h>

#include "tern/gguf/gguf_file.h"
#include "tern/tokenizer/unicode.h"
#include "testutil.h"

namespace tern {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

// A SentencePiece vocabulary of byte tokens only (no space prefix), so every
// UTF-8 byte is its own token: the hardest case for streaming.
Tokenizer byte_vocab() {
  VocabSpec s;
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.token_types = {2, 3, 3};
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    s.tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    s.token_types.push_back(6);
  }
  s.add_space_prefix = false;
  return Tokenizer::from_spec(s);
}

int32_t byte_id(int b) {
  return 3 + b;
}

// Feeds ids one at a time; checks every piece is valid UTF-8 and returns them.
std::vector<std::string> stream(const Tokenizer& tok, const std::vector<int32_t>& ids,
                                bool render_special = false) {
  IncrementalDecoder dec(tok, render_special);
  std::vector<std::string> pieces;
  for (int32_t id : ids) {
    pieces.push_back(dec.push(id));
    EXPECT_TRUE(unicode::is_valid_utf8(pieces.back())) << "after id " << id;
  }
  pieces.push_back(dec.flush());
  EXPECT_TRUE(unicode::is_valid_utf8(pieces.back()));
  EXPECT_EQ(dec.pending_bytes(), 0u);
  return pieces;
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += p;
  return s;
}

TEST(IncrementalDecoder, HoldsBackSplitCharacters) {
  const Tokenizer tok = byte_vocab();
  const std::string text = "a😀中é";
  const auto ids = tok.encode(text, false, false);
  ASSERT_EQ(ids.size(), text.size());  // one byte token per byte
  const auto pieces = stream(tok, ids);
  EXPECT_EQ(join(pieces), text);
  EXPECT_EQ(pieces[0], "a");
  EXPECT_EQ(pieces[1], "");  // 1/4 of 😀
  EXPECT_EQ(pieces[3], "");  // 3/4
  EXPECT_EQ(pieces[4], "😀");
  EXPECT_EQ(pieces[7], "中");
  EXPECT_EQ(pieces[9], "é");
  EXPECT_EQ(pieces.back(), "");
}

TEST(IncrementalDecoder, InvalidBytesBecomeReplacementAtOnce) {
  const Tokenizer tok = byte_vocab();
  IncrementalDecoder dec(tok);
  EXPECT_EQ(dec.push(byte_id(0xFF)), kReplacement);  // can never start a character
  EXPECT_EQ(dec.push(byte_id(0xE2)), "");
  EXPECT_EQ(dec.push(byte_id(0x82)), "");
  EXPECT_EQ(dec.pending_bytes(), 2u);
  EXPECT_EQ(dec.push(byte_id('x')), kReplacement + "x");  // the broken sequence, then x
  EXPECT_EQ(dec.push(byte_id(0xF0)), "");
  EXPECT_EQ(dec.flush(), kReplacement);  // truncated at the end
  EXPECT_EQ(dec.flush(), "");
  EXPECT_EQ(dec.push(byte_id(0x80)), kReplacement);  // lone continuation byte
}

TEST(IncrementalDecoder, ControlTokensRenderOnlyOnRequest) {
  const Tokenizer tok = byte_vocab();
  IncrementalDecoder plain(tok);
  EXPECT_EQ(plain.push(2), "");
  IncrementalDecoder rendered(tok, /*render_special=*/true);
  EXPECT_EQ(rendered.push(2), "</s>");
}

TEST(IncrementalDecoder, DefaultModelStreamsEmojiAndCjk) {
  const std::string model = test::default_model_path();
  if (!test::file_exists(model)) GTEST_SKIP() << "default model not found: " << model;
  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::open(model));
  const std::vector<std::string> texts = {
      "Family: 👨‍👩‍👧‍👦 done",
      "Flags: 🇺🇸 🇫🇷 🏳️‍🌈",
      "你好，世界！我爱自然语言处理。",
      "こんにちは世界",
      "👍🏻👍🏼👍🏽👍🏾👍🏿",
      "café naïve e\u0301",
      "नमस्ते दुनिया",
      "mixed 中文 and 😀 text",
  };
  size_t held_back = 0;
  for (const std::string& text : texts) {
    const auto ids = tok.encode(text, false, false);
    const auto pieces = stream(tok, ids);
    EXPECT_EQ(join(pieces), tok.decode(ids)) << text;
    EXPECT_EQ(join(pieces), text);
    for (size_t i = 0; i + 1 < pieces.size(); ++i) held_back += pieces[i].empty();
  }
  EXPECT_GT(held_back, 0u);  // some tokens really ended inside a character
}

TEST(IncrementalDecoder, DefaultModelRendersChatMarkers) {
  const std::string model = test::default_model_path();
  if (!test::file_exists(model)) GTEST_SKIP() << "default model not found: " << model;
  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::open(model));
  const std::string text = "<|im_start|>assistant\nHi 👋<|im_end|>";
  const auto ids = tok.encode(text, false, true);
  EXPECT_EQ(join(stream(tok, ids)), "assistant\nHi 👋");
  EXPECT_EQ(join(stream(tok, ids, /*render_special=*/true)), text);
}

}  // namespace
}  // namespace tern
