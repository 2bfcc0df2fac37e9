// Tokenizer behaviour on small hand-made vocabularies written with GgufWriter:
// merge order, special-token splitting, byte handling, metadata and errors.
#include "tern/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "tern/core/error.h"
#include "tern/gguf/gguf_file.h"
#include "tern/gguf/gguf_writer.h"
#include "tern/tokenizer/unicode.h"

namespace tern {
namespace {

// GPT-2's printable spelling of a byte (bytes_to_unicode).
std::string byte_char(int b) {
  const bool printable =
      (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int cp = b;
  if (!printable) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

struct BpeVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;

  int32_t add(const std::string& text, int32_t type = 1) {
    tokens.push_back(text);
    types.push_back(type);
    return static_cast<int32_t>(tokens.size() - 1);
  }
};

// <|endoftext|> (control), <tool> (user-defined), <ctl> (control), the 256
// byte tokens, then the results of `merges`.
BpeVocab base_vocab(const std::vector<std::string>& merges) {
  BpeVocab v;
  v.add("<|endoftext|>", 3);
  v.add("<tool>", 4);
  v.add("<ctl>", 3);
  for (int b = 0; b < 256; ++b) v.add(byte_char(b));
  for (const std::string& m : merges) {
    const size_t sp = m.find(' ');
    const std::string joined = m.substr(0, sp) + m.substr(sp + 1);
    bool present = false;
    for (const auto& t : v.tokens) present |= t == joined;
    if (!present) v.add(joined);
  }
  v.merges = merges;
  return v;
}

Tokenizer make_bpe(const BpeVocab& v, const std::string& pre = "gpt2",
                   const std::function<void(gguf::GgufWriter&)>& extra = {}) {
  gguf::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", 0);
  w.set_u32("tokenizer.ggml.eos_token_id", 0);
  if (extra) extra(w);
  const std::vector<uint8_t> bytes = w.to_bytes();
  return Tokenizer::from_gguf(gguf::GgufFile::from_memory(bytes, "test.gguf"));
}

std::vector<std::string> spellings(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(tok.token_text(id));
  return out;
}

using Strings = std::vector<std::string>;

TEST(BpeTokenizer, MergesWholeWords) {
  const auto v =
      base_vocab({"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d"});
  const Tokenizer tok = make_bpe(v);
  const auto ids = tok.encode("hello world", false, false);
  EXPECT_EQ(spellings(tok, ids), (Strings{"hello", "Ġworld"}));
  EXPECT_EQ(tok.decode(ids), "hello world");
  EXPECT_EQ(tok.token_to_piece(ids[1]), " world");
}

TEST(BpeTokenizer, LowerRankMergesFirst) {
  const Tokenizer bc_first = make_bpe(base_vocab({"b c", "a b"}));
  EXPECT_EQ(spellings(bc_first, bc_first.encode("abc", false, false)), (Strings{"a", "bc"}));
  const Tokenizer ab_first = make_bpe(base_vocab({"a b", "b c"}));
  EXPECT_EQ(spellings(ab_first, ab_first.encode("abc", false, false)), (Strings{"ab", "c"}));
}

TEST(BpeTokenizer, EqualPairsMergeLeftmostFirst) {
  const Tokenizer tok = make_bpe(base_vocab({"a a"}));
  EXPECT_EQ(spellings(tok, tok.encode("aaa", false, false)), (Strings{"aa", "a"}));
  EXPECT_EQ(spellings(tok, tok.encode("aaaa", false, false)), (Strings{"aa", "aa"}));
}

TEST(BpeTokenizer, MergeWithoutTokenFallsBackToBytes) {
  BpeVocab v = base_vocab({});
  v.merges = {"q z"};  // "qz" is not a token
  const Tokenizer tok = make_bpe(v);
  EXPECT_EQ(spellings(tok, tok.encode("qz", false, false)), (Strings{"q", "z"}));
}

TEST(BpeTokenizer, UserDefinedTokensAlwaysSplitControlOnlyWhenParsing) {
  const Tokenizer tok = make_bpe(base_vocab({}));
  EXPECT_EQ(spellings(tok, tok.encode("x<tool>y", false, false)), (Strings{"x", "<tool>", "y"}));
  EXPECT_EQ(spellings(tok, tok.encode("x<ctl>", false, true)), (Strings{"x", "<ctl>"}));
  const auto plain = tok.encode("x<ctl>", false, false);
  EXPECT_EQ(plain.size(), 6u);  // x < c t l > as byte tokens: no merges in this vocabulary
  EXPECT_EQ(tok.decode(plain), "x<ctl>");
  // Control tokens render only on request; user-defined ones always.
  const int32_t ctl = *tok.token_id("<ctl>");
  const int32_t tool = *tok.token_id("<tool>");
  EXPECT_EQ(tok.token_to_piece(ctl), "");
  EXPECT_EQ(tok.token_to_piece(ctl, true), "<ctl>");
  EXPECT_EQ(tok.token_to_piece(tool), "<tool>");
  EXPECT_TRUE(tok.is_control(ctl));
  EXPECT_FALSE(tok.is_control(tool));
  EXPECT_EQ(tok.token_type(tool), TokenType::kUserDefined);
}

TEST(BpeTokenizer, SegmentsParseControlTokensOnlyWhereAsked) {
  const Tokenizer tok = make_bpe(base_vocab({"a b", "ab c"}));
  const int32_t ctl = 2;
  const std::vector<TextSegment> segs = {
      {"<ctl>ab", true}, {"c<ctl><tool>", false}, {"<ctl>", true}};
  const auto ids = tok.encode(segs, false);
  // The parsed <ctl>s are control tokens; the literal one is bytes; <tool>
  // (user-defined) splits everywhere; "ab"+"c" merges across the boundary.
  EXPECT_EQ(spellings(tok, ids),
            (Strings{"<ctl>", "abc", "<", "c", "t", "l", ">", "<tool>", "<ctl>"}))
      << ::testing::PrintToString(spellings(tok, ids));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ctl), 2);
  EXPECT_EQ(tok.decode(ids, true), "<ctl>abc<ctl><tool><ctl>");
  // A spelling that straddles a parsed and a literal segment stays literal.
  const std::vector<TextSegment> straddle = {{"<ct", true}, {"l>", false}};
  const auto literal = tok.encode(straddle, false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), ctl), 0);
  // Adjacent parsed segments form one range; no literal segment: same as encode(text, parse).
  const std::vector<TextSegment> split = {{"x<ct", true}, {"l>ab", true}};
  EXPECT_EQ(tok.encode(split, true), tok.encode("x<ctl>ab", true, true));
}

// A SentencePiece vocabulary of three control tokens, "\u2581", "a" and "\u2581a".
Tokenizer tiny_spm() {
  VocabSpec s;
  s.model = "llama";
  s.tokens = {"<unk>",
              "<s>",
              "</s>",
              "\xE2\x96\x81",
              "a",
              "\xE2\x96\x81"
              "a"};
  s.token_types = {2, 3, 3, 1, 1, 1};
  s.scores = {0, 0, 0, -1, -1, -0.5f};
  return Tokenizer::from_spec(s);
}

TEST(SpmTokenizer, SegmentsKeepTheSpacePrefixOfTheJoinedText) {
  const Tokenizer tok = tiny_spm();
  const std::vector<TextSegment> segs = {{"a", true}, {" a", false}, {"</s>", true}, {"a", false}};
  EXPECT_EQ(tok.encode(segs, true), tok.encode("a a</s>a", true, true));
  EXPECT_EQ(tok.encode(segs, true), (std::vector<int32_t>{1, 5, 5, 2, 5}));
}

TEST(BpeTokenizer, LongestSpecialSpellingWins) {
  BpeVocab v = base_vocab({});
  const int32_t short_tok = v.add("<a>", 3);
  const int32_t long_tok = v.add("<a><b>", 3);
  const Tokenizer tok = make_bpe(v);
  EXPECT_EQ(tok.encode("<a><b><a>", false, true), (std::vector<int32_t>{long_tok, short_tok}));
}

TEST(BpeTokenizer, NonAsciiBytesUseByteLevelSpelling) {
  const Tokenizer tok = make_bpe(base_vocab({}));
  const auto ids = tok.encode("é😀", false, false);
  EXPECT_EQ(ids.size(), 6u);  // 2 + 4 UTF-8 bytes, one byte token each
  EXPECT_EQ(tok.decode(ids), "é😀");
  EXPECT_EQ(tok.token_to_piece(ids[0]), "\xC3");
  EXPECT_EQ(tok.token_to_piece(-1), "");
  EXPECT_EQ(tok.token_to_piece(tok.n_vocab()), "");
}

TEST(BpeTokenizer, InvalidUtf8BecomesReplacementCharacter) {
  const Tokenizer tok = make_bpe(base_vocab({}));
  EXPECT_EQ(tok.decode(tok.encode("a\xFF"
                                  "b",
                                  false, false)),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(BpeTokenizer, Llama3IgnoresMergesForWholeWordTokens) {
  BpeVocab v = base_vocab({});
  v.add("Ġfoo");
  EXPECT_EQ(make_bpe(v, "gpt2").encode("a foo", false, false).size(), 5u);
  const Tokenizer llama3 = make_bpe(v, "llama-bpe");
  EXPECT_EQ(spellings(llama3, llama3.encode("a foo", false, false)), (Strings{"a", "Ġfoo"}));
  EXPECT_TRUE(
      llama3.add_bos_default());  // llama3 vocabularies add BOS unless the metadata says otherwise
}

TEST(BpeTokenizer, AddsBosAndEosWhenTheVocabularyAsks) {
  const auto v = base_vocab({});
  const Tokenizer tok = make_bpe(v, "gpt2", [](gguf::GgufWriter& w) {
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    w.set_bool("tokenizer.ggml.add_eos_token", true);
  });
  EXPECT_TRUE(tok.add_bos_default());
  EXPECT_EQ(tok.encode("a", true, false), (std::vector<int32_t>{1, *tok.token_id("a"), 2}));
  EXPECT_EQ(tok.encode("a", false, false), (std::vector<int32_t>{*tok.token_id("a")}));
  const Tokenizer no_bos = make_bpe(v);
  EXPECT_FALSE(no_bos.add_bos_default());
  EXPECT_EQ(no_bos.encode("a", true, false).size(), 1u);
}

TEST(BpeTokenizer, EndOfGenerationTokensBySpelling) {
  BpeVocab v = base_vocab({});
  const int32_t im_end = v.add("<|im_end|>", 3);
  const int32_t eot_id = v.add("<|eot_id|>", 1);  // not marked control in the file
  const Tokenizer tok = make_bpe(v);
  EXPECT_EQ(tok.eot(), eot_id);  // <|eot_id|> has the highest priority
  EXPECT_TRUE(tok.is_eog(0));    // <|endoftext|>, also the eos here
  EXPECT_TRUE(tok.is_eog(im_end));
  EXPECT_TRUE(tok.is_eog(eot_id));
  EXPECT_TRUE(tok.is_control(eot_id));  // promoted, as llama.cpp does
  EXPECT_FALSE(tok.is_eog(*tok.token_id("a")));
  EXPECT_FALSE(tok.is_eog(-5));
  EXPECT_EQ(tok.eog_ids(), (std::vector<int32_t>{0, im_end, eot_id}));
}

TEST(BpeTokenizer, LookupsAndNames) {
  const Tokenizer tok = make_bpe(base_vocab({"h e"}));
  EXPECT_EQ(tok.n_vocab(), 3 + 256 + 1);
  EXPECT_EQ(tok.token_id("he"), tok.n_vocab() - 1);
  EXPECT_FALSE(tok.token_id("nope").has_value());
  EXPECT_EQ(tok.token_text(0), "<|endoftext|>");
  EXPECT_THROW(tok.token_text(tok.n_vocab()), InvalidArgument);
  EXPECT_EQ(tok.model(), "gpt2");
  EXPECT_EQ(tok.pre_tokenizer(), "gpt2");
  const Tokenizer copy = tok;  // copies share the vocabulary
  EXPECT_EQ(copy.encode("he", false, false), tok.encode("he", false, false));
}

TEST(BpeTokenizer, MissingPreTokenizerUsesDefault) {
  gguf::GgufWriter w;
  const auto v = base_vocab({});
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_string_array("tokenizer.ggml.merges", {});
  const auto bytes = w.to_bytes();
  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::from_memory(bytes, "x.gguf"));
  EXPECT_EQ(tok.pre_tokenizer(), "default");
  EXPECT_EQ(tok.decode(tok.encode("it's 12345", false, false)), "it's 12345");
}

TEST(BpeTokenizer, RandomBytesRoundTripForEveryPreTokenizer) {
  const auto v = base_vocab({"h e", "l l", "Ġ Ġ", "1 2", "he ll"});
  std::mt19937 rng(7);
  const std::vector<std::string> pieces = {"hello", " ",        "  ",    "\n", "\t", "12",
                                           "'s",    "<tool>",   "<ctl>", "é",  "😀",  "中",
                                           "\xFF",  "\xE2\x82", "\x80",  "!",  "Ġ"};
  for (const std::string pre : {"default", "gpt2", "smollm", "llama-bpe", "qwen2"}) {
    const Tokenizer tok = make_bpe(v, pre);
    for (int round = 0; round < 200; ++round) {
      std::string text;
      const int n = static_cast<int>(rng() % 24);
      for (int i = 0; i < n; ++i) {
        text += (rng() % 4 == 0) ? std::string(1, static_cast<char>(rng() % 256))
                                 : pieces[rng() % pieces.size()];
      }
      std::string repaired;
      for (uint32_t cp : unicode::decode_utf8_lenient(text)) unicode::append_utf8(repaired, cp);
      // Control tokens are not parsed, user-defined ones are and render back as themselves.
      // (Pieces are joined directly: decode() of some of these vocabularies removes spaces.)
      const auto join = [&](const std::vector<int32_t>& ids, bool render) {
        std::string s;
        for (int32_t id : ids) s += tok.token_to_piece(id, render);
        return s;
      };
      EXPECT_EQ(join(tok.encode(text, false, false), false), repaired) << pre;
      EXPECT_EQ(join(tok.encode(text, false, true), true), repaired) << pre;
      if (!tok.encode(text, false, false).empty() && (pre == "smollm" || pre == "qwen2")) {
        EXPECT_EQ(tok.decode(tok.encode(text, false, false)), repaired)
            << pre;  // no clean-up for these
      }
    }
  }
}

// --- errors ---

void expect_format_error(const VocabSpec& spec, const std::string& needle) {
  try {
    Tokenizer::from_spec(spec, "bad.gguf");
    FAIL() << "expected FormatError containing '" << needle << "'";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.gguf"), std::string::npos) << e.what();
  }
}

TEST(TokenizerErrors, BadMetadataIsAFormatError) {
  VocabSpec ok;
  ok.model = "gpt2";
  ok.pre = "gpt2";
  ok.tokens = {"a", "b"};
  EXPECT_NO_THROW(Tokenizer::from_spec(ok));

  VocabSpec s = ok;
  s.model = "";
  expect_format_error(s, "tokenizer.ggml.model");
  s = ok;
  s.model = "rwkv";  // not supported
  expect_format_error(s, "'rwkv'");
  s = ok;
  s.model = "bert";  // WordPiece without its [CLS] (BOS)
  expect_format_error(s, "BOS");
  s = ok;
  s.pre = "no-such-pre";
  expect_format_error(s, "'no-such-pre'");
  s = ok;
  s.tokens.clear();
  expect_format_error(s, "tokens");
  s = ok;
  s.tokens = {"a", "a"};
  expect_format_error(s, "duplicate token");
  s = ok;
  s.scores = {0.0f};
  expect_format_error(s, "scores");
  s = ok;
  s.token_types = {1};
  expect_format_error(s, "token_type");
  s = ok;
  s.add_bos = true;  // gpt2's default BOS id (11) is out of range here
  expect_format_error(s, "BOS");
}

TEST(TokenizerErrors, GgufWithoutTokenizerIsAFormatError) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  const auto bytes = w.to_bytes();
  const auto f = gguf::GgufFile::from_memory(bytes, "empty.gguf");
  EXPECT_THROW(Tokenizer::from_gguf(f), FormatError);

  gguf::GgufWriter w2;
  w2.set_string("tokenizer.ggml.model", "gpt2");
  w2.set_string_array("tokenizer.ggml.tokens", {"a"});
  const auto bytes2 = w2.to_bytes();
  try {
    Tokenizer::from_gguf(gguf::GgufFile::from_memory(bytes2, "nomerges.gguf"));
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("merges"), std::string::npos) << e.what();
  }
}

TEST(TokenizerErrors, OutOfRangeSpecialIdsAreIgnored) {
  VocabSpec s;
  s.model = "gpt2";
  s.pre = "gpt2";
  s.tokens = {"a", "b"};
  s.eos = 99;
  s.bos = 1;
  const Tokenizer tok = Tokenizer::from_spec(s);
  EXPECT_EQ(tok.eos(), -1);
  EXPECT_EQ(tok.bos(), 1);
}

// --- SentencePiece specifics not covered by the llama.cpp golden ---

TEST(SpmTokenizer, UnknownCharacterWithoutByteTokensIsUnk) {
  const Tokenizer tok = tiny_spm();
  EXPECT_EQ(tok.encode("a", false, false), (std::vector<int32_t>{5}));
  EXPECT_EQ(tok.encode("a", true, false), (std::vector<int32_t>{1, 5}));
  // 'z' has neither a token nor <0x7A>: one <unk>.
  EXPECT_EQ(tok.encode("az", false, false), (std::vector<int32_t>{5, 0}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{5, 5}), "a a");  // first leading space dropped
  EXPECT_EQ(tok.pre_tokenizer(), "");
}

}  // namespace
}  // namespace tern
