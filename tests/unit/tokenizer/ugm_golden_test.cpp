// The unigram ("t5") tokenizer against llama.cpp, from
// tests/fixtures/tokenizer_ugm_golden.json (scripts/oracle/gen_ugm_golden.py):
// the generated XLM-R vocabulary (scores, a user-defined, an unused and a
// byte token, a precompiled charsmap with NFKC's full-width forms,
// ligatures, composed accents, half-width katakana, odd spaces), tokenized by
// llama-server with add_space_prefix and remove_extra_whitespaces as the
// file says and switched off, each text with the special tokens added and
// with control tokens parsed, and each result's pieces.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tern/gguf/gguf_file.h"
#include "tern/gguf/gguf_writer.h"
#include "tern/tokenizer/tokenizer.h"
#include "testutil.h"

namespace tern {
namespace {

using nlohmann::json;

const json& golden() {
  static const json j = [] {
    std::ifstream in(test::fixture_path("tokenizer_ugm_golden.json"));
    if (!in) throw std::runtime_error("missing fixture tokenizer_ugm_golden.json");
    return json::parse(in);
  }();
  return j;
}

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

VocabSpec spec(const json& flags) {
  const json& v = golden().at("vocab");
  VocabSpec s;
  s.model = "t5";
  s.pre = "default";
  s.tokens = v.at("tokens").get<std::vector<std::string>>();
  s.scores = v.at("scores").get<std::vector<float>>();
  s.token_types = v.at("token_types").get<std::vector<int32_t>>();
  s.precompiled_charsmap = unhex(v.at("precompiled_charsmap_hex").get<std::string>());
  s.bos = v.at("bos_token_id").get<int32_t>();
  s.eos = v.at("eos_token_id").get<int32_t>();
  s.unk = v.at("unknown_token_id").get<int32_t>();
  s.sep = v.at("seperator_token_id").get<int32_t>();
  s.pad = v.at("padding_token_id").get<int32_t>();
  s.add_bos = v.at("add_bos_token").get<bool>();
  s.add_eos = v.at("add_eos_token").get<bool>();
  s.add_space_prefix = flags.at("add_space_prefix").get<bool>();
  s.remove_extra_whitespaces = flags.at("remove_extra_whitespaces").get<bool>();
  return s;
}

TEST(UgmGolden, TokenizationsMatchLlamaCpp) {
  size_t checked = 0;
  for (const json& run : golden().at("runs")) {
    const Tokenizer t = Tokenizer::from_spec(spec(run.at("flags")), "ugm golden");
    EXPECT_EQ(t.model(), "t5");
    for (const json& c : run.at("cases")) {
      const std::string text = c.at("text").get<std::string>();
      const auto ids = t.encode(text, /*add_bos=*/true, /*parse_special=*/false);
      EXPECT_EQ(ids, c.at("ids").get<std::vector<int32_t>>()) << run.at("flags") << " " << text;
      EXPECT_EQ(t.encode(text, false, true), c.at("ids_parse_special").get<std::vector<int32_t>>())
          << run.at("flags") << " " << text;
      std::string pieces;
      for (int32_t id : c.at("ids").get<std::vector<int32_t>>())
        pieces += t.token_to_piece(id, true);
      EXPECT_EQ(pieces, c.at("pieces").get<std::string>()) << text;
      ++checked;
    }
  }
  EXPECT_GE(checked, 60u);
}

// The file path: the same vocabulary read back through GgufFile, the
// charsmap stored as an array of bytes as the converter writes it.
TEST(UgmGolden, ReadsTheCharsmapFromGguf) {
  const json& run = golden().at("runs").at(0);
  const VocabSpec s = spec(run.at("flags"));
  gguf::GgufWriter w;
  w.set_string("general.architecture", "bert");
  w.set_string("tokenizer.ggml.model", "t5");
  w.set_string_array("tokenizer.ggml.tokens", s.tokens);
  w.set_f32_array("tokenizer.ggml.scores", s.scores);
  w.set_i32_array("tokenizer.ggml.token_type", s.token_types);
  w.set_array("tokenizer.ggml.precompiled_charsmap",
              std::vector<uint8_t>(s.precompiled_charsmap.begin(), s.precompiled_charsmap.end()));
  w.set_bool("tokenizer.ggml.add_space_prefix", true);
  w.set_bool("tokenizer.ggml.remove_extra_whitespaces", true);
  w.set_u32("tokenizer.ggml.bos_token_id", uint32_t(*s.bos));
  w.set_u32("tokenizer.ggml.eos_token_id", uint32_t(*s.eos));
  w.set_u32("tokenizer.ggml.unknown_token_id", uint32_t(*s.unk));
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  const std::string path = test::temp_path("ugm_vocab.gguf");
  w.write(path);
  const Tokenizer t = Tokenizer::from_gguf(gguf::GgufFile::open(path));
  EXPECT_TRUE(t.add_eos_default());  // the t5 default, the file not saying
  for (const json& c : run.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    EXPECT_EQ(t.encode(text, true, false), c.at("ids").get<std::vector<int32_t>>()) << text;
  }
}

}  // namespace
}  // namespace tern
