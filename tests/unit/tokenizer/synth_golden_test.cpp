// Checks against llama.cpp on synthetic vocabularies (no model needed), from
// tests/fixtures/tokenizer_synth_golden.json (scripts/gen_tokenizer_golden.py):
//   - the words every supported pre-tokenizer splits a text into;
//   - a SentencePiece ("llama") vocabulary with scores, byte fallback, a
//     user-defined token, with and without add_space_prefix, built here
//     through GgufWriter -> GgufFile -> Tokenizer::from_gguf.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tern/gguf/gguf_file.h"
#include "tern/gguf/gguf_writer.h"
#include "tern/tokenizer/pre_tokenizer.h"
#include "tern/tokenizer/tokenizer.h"
#include "testutil.h"

namespace tern {
namespace {

using nlohmann::json;

const json& synth() {
  static const json j = [] {
    std::ifstream in(test::fixture_path("tokenizer_synth_golden.json"));
    if (!in) throw std::runtime_error("missing fixture tokenizer_synth_golden.json");
    return json::parse(in);
  }();
  return j;
}

std::string field_bytes(const json& c, const std::string& name) {
  if (c.contains(name)) return c.at(name).get<std::string>();
  const std::string hex = c.at(name + "_hex").get<std::string>();
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

TEST(SynthGolden, PreTokenizerWordsMatchLlamaCpp) {
  size_t checked = 0;
  for (const json& c : synth().at("pre_tokenizer")) {
    const std::string pre = c.at("pre").get<std::string>();
    const auto config = pre_tokenizer_by_name(pre);
    ASSERT_TRUE(config.has_value()) << pre;
    const std::string text = field_bytes(c, "text");
    EXPECT_EQ(pre_tokenize(config->kind, text), c.at("words").get<std::vector<std::string>>())
        << "pre=" << pre << " text=" << c.dump();
    ++checked;
  }
  EXPECT_GE(checked, 150u);
}

Tokenizer spm_tokenizer(bool add_space_prefix) {
  const json& v = synth().at("spm").at("vocab");
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", v.at("tokens").get<std::vector<std::string>>());
  w.set_f32_array("tokenizer.ggml.scores", v.at("scores").get<std::vector<float>>());
  w.set_i32_array("tokenizer.ggml.token_type", v.at("token_types").get<std::vector<int32_t>>());
  w.set_bool("tokenizer.ggml.add_space_prefix", add_space_prefix);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const gguf::GgufFile f = gguf::GgufFile::from_memory(bytes, "synthetic-spm");
  return Tokenizer::from_gguf(f);
}

TEST(SynthGolden, SentencePieceMatchesLlamaCpp) {
  const Tokenizer with_prefix = spm_tokenizer(true);
  const Tokenizer without_prefix = spm_tokenizer(false);
  EXPECT_EQ(with_prefix.model(), "llama");
  EXPECT_EQ(with_prefix.bos(), 1);
  EXPECT_EQ(with_prefix.eos(), 2);
  EXPECT_EQ(with_prefix.unk(), 0);
  EXPECT_TRUE(with_prefix.add_bos_default());
  size_t checked = 0;
  for (const json& c : synth().at("spm").at("cases")) {
    const Tokenizer& tok = c.at("add_space_prefix").get<bool>() ? with_prefix : without_prefix;
    const std::string text = c.at("text").get<std::string>();
    const auto ids =
        tok.encode(text, c.at("add_bos").get<bool>(), c.at("parse_special").get<bool>());
    EXPECT_EQ(ids, c.at("ids").get<std::vector<int32_t>>()) << c.dump();
    EXPECT_EQ(tok.decode(ids), field_bytes(c, "detok")) << c.dump();
    EXPECT_EQ(tok.decode(ids, true), field_bytes(c, "detok_special")) << c.dump();
    ++checked;
  }
  EXPECT_GE(checked, 60u);
}

}  // namespace
}  // namespace tern
