// POST /v1/embeddings: parsing (every input shape, every refusal naming its
// field) and the response body (float and base64, dimensions, usage).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "../../../src/server/embeddings_route.h"
#include "tern/gguf/gguf.h"
#include "tern/tokenizer/tokenizer.h"
#include "tiny_model.h"

namespace tern::server {
namespace {

using json = nlohmann::json;

const Tokenizer& tok() {
  static const Tokenizer t = [] {
    test::TinyModelSpec spec;
    spec.n_vocab = 131;  // 3 control tokens and the 128 ASCII bytes: any ASCII text encodes
    const std::string path = test::write_tiny_model(spec, "embeddings_vocab.gguf");
    return Tokenizer::from_gguf(gguf::GgufFile::open(path));
  }();
  return t;
}

constexpr EmbeddingLimits kLim{16, 32, 8};  // 16 tokens an input, context 32, 8 dimensions

EmbeddingsRequest parse(const json& body, UnknownFields u = UnknownFields::Ignore) {
  return parse_embeddings_request(body, tok(), kLim, u);
}

// The ApiError parse throws: its param and code.
std::pair<std::string, std::string> refusal(const json& body,
                                            UnknownFields u = UnknownFields::Ignore) {
  try {
    parse(body, u);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return {e.param(), e.code()};
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return {};
}

TEST(Embeddings, EveryInputShape) {
  const auto ids = [](const std::string& s) { return tok().encode(s, true, true); };
  EmbeddingsRequest r = parse({{"input", "hello"}, {"model", "m"}});
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0], ids("hello"));
  EXPECT_EQ(r.model, "m");
  EXPECT_FALSE(r.base64);
  EXPECT_EQ(r.dimensions, 0);
  r = parse({{"input", {"ab", "cde"}}});
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1], ids("cde"));
  EXPECT_EQ(r.prompt_tokens, int64_t(ids("ab").size() + ids("cde").size()));
  r = parse({{"input", {5, 6, 7}}});  // one input as token ids, run as given
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0], (std::vector<int32_t>{5, 6, 7}));
  r = parse({{"input", {{5}, {6, 7}}}, {"encoding_format", "base64"}, {"dimensions", 3}});
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1], (std::vector<int32_t>{6, 7}));
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(r.dimensions, 3);
  EXPECT_EQ(r.prompt_tokens, 3);
}

TEST(Embeddings, RefusalsNameTheField) {
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(refusal(json::object()), P("input", "missing_required_parameter"));
  EXPECT_EQ(refusal({{"input", json::array()}}), P("input", "invalid_value"));
  EXPECT_EQ(refusal({{"input", ""}}), P("input", "invalid_value"));
  EXPECT_EQ(refusal({{"input", {"a", ""}}}), P("input[1]", "invalid_value"));
  EXPECT_EQ(refusal({{"input", {"a", 3}}}), P("input[1]", "invalid_type"));
  EXPECT_EQ(refusal({{"input", {{1}, 3}}}), P("input[1]", "invalid_type"));
  EXPECT_EQ(refusal({{"input", {{1}, json::array()}}}), P("input[1]", "invalid_value"));
  EXPECT_EQ(refusal({{"input", {{1}, {"x"}}}}), P("input[1]", "invalid_type"));
  EXPECT_EQ(refusal({{"input", {{1}, {1000000}}}}), P("input[1]", "invalid_value"));
  EXPECT_EQ(refusal({{"input", {-1}}}), P("input", "invalid_value"));
  EXPECT_EQ(refusal({{"input", {1.5}}}), P("input", "invalid_type"));
  EXPECT_EQ(refusal({{"input", 42}}), P("input", "invalid_type"));
  EXPECT_EQ(refusal({{"input", {true}}}), P("input[0]", "invalid_type"));
  EXPECT_EQ(refusal({{"input", {{{"text", "a"}}}}}), P("input[0]", "invalid_type"));
  EXPECT_EQ(refusal({{"input", "a"}, {"encoding_format", "hex"}}),
            P("encoding_format", "invalid_value"));
  EXPECT_EQ(refusal({{"input", "a"}, {"dimensions", 0}}), P("dimensions", "invalid_value"));
  EXPECT_EQ(refusal({{"input", "a"}, {"dimensions", 9}}), P("dimensions", "invalid_value"));
  EXPECT_EQ(refusal({{"input", "a"}, {"dimensions", "4"}}), P("dimensions", "invalid_type"));
  EXPECT_EQ(refusal({{"input", "a"}, {"model", 3}}), P("model", "invalid_type"));
  EXPECT_EQ(refusal({{"input", "a"}, {"tmperature", 1}}, UnknownFields::Refuse).second,
            "unknown_parameter");
}

TEST(Embeddings, LimitsAreCheckedPerInput) {
  // The second input is longer than an input may be: named, with the limit.
  const json body = {{"input", {"short", std::string(40, 'x')}}};
  try {
    parse(body);
    FAIL() << "a 40-token input passed a 16-token limit";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "input[1]");
    EXPECT_EQ(e.code(), "context_length_exceeded");
    EXPECT_NE(std::string(e.what()).find("32 tokens"), std::string::npos) << e.what();
  }
  // Exactly at the limit is fine; one more input than kMaxEmbeddingInputs is not.
  EXPECT_EQ(parse({{"input", std::vector<int>(16, 5)}}).inputs[0].size(), 16u);
  EXPECT_EQ(refusal({{"input", std::vector<std::string>(kMaxEmbeddingInputs + 1, "a")}}),
            std::make_pair(std::string("input"), std::string("invalid_value")));
  EXPECT_EQ(parse({{"input", std::vector<std::string>(kMaxEmbeddingInputs, "a")}}).inputs.size(),
            kMaxEmbeddingInputs);
}

// "truncate": true (TEI) keeps an input's start; "truncate_prompt_tokens": k
// (vLLM) its last k tokens, -1 the most the server takes.
TEST(Embeddings, TruncationCutsInsteadOfRefusing) {
  const std::vector<int> long_ids = [] {
    std::vector<int> v(40);
    for (int i = 0; i < 40; ++i) v[size_t(i)] = 3 + i;
    return v;
  }();
  EmbeddingsRequest r = parse({{"input", long_ids}, {"truncate", true}});
  EXPECT_EQ(r.inputs[0], std::vector<int32_t>(long_ids.begin(), long_ids.begin() + 16));
  EXPECT_EQ(r.prompt_tokens, 16);
  r = parse({{"input", long_ids}, {"truncate_prompt_tokens", 5}});
  EXPECT_EQ(r.inputs[0], std::vector<int32_t>(long_ids.end() - 5, long_ids.end()));
  r = parse({{"input", {"short", std::string(40, 'x')}}, {"truncate_prompt_tokens", -1}});
  EXPECT_EQ(r.inputs[1].size(), 16u);
  EXPECT_EQ(r.inputs[0], tok().encode("short", true, true));  // short ones stay whole
  EXPECT_EQ(refusal({{"input", "a"}, {"truncate_prompt_tokens", 17}}).first,
            "truncate_prompt_tokens");
  EXPECT_EQ(refusal({{"input", "a"}, {"truncate_prompt_tokens", 0}}).first,
            "truncate_prompt_tokens");
  EXPECT_EQ(refusal({{"input", "a"}, {"truncate", "yes"}}).first, "truncate");
  EXPECT_EQ(refusal({{"input", long_ids}, {"truncate", false}}).second, "context_length_exceeded");
}

TEST(Embeddings, Base64IsLittleEndianFloat32) {
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f}), "AACAPw==");  // 00 00 80 3f
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f, -2.0f, 0.5f}), "AACAPwAAAMAAAAA/");
  EXPECT_EQ(base64_floats(std::vector<float>{}), "");
}

std::vector<float> from_base64(const std::string& s) {
  static const std::string a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes;
  uint32_t w = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    w = (w << 6) | uint32_t(a.find(c));
    bits += 6;
    if (bits >= 8) bytes.push_back((w >> (bits -= 8)) & 0xff);
  }
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

TEST(Embeddings, BodyNormalisesCutsAndEncodes) {
  const std::vector<std::vector<float>> pooled = {{3, 4, 12, 0}, {0, 0, 0, 2}};
  EmbeddingsRequest r = parse({{"input", {"ab", "c"}}});
  json b = embeddings_body(r, pooled, "served");
  EXPECT_EQ(b["object"], "list");
  EXPECT_EQ(b["model"], "served");  // none named: the served model
  EXPECT_EQ(b["usage"]["prompt_tokens"], r.prompt_tokens);
  EXPECT_EQ(b["usage"]["total_tokens"], r.prompt_tokens);
  ASSERT_EQ(b["data"].size(), 2u);
  EXPECT_EQ(b["data"][1]["index"], 1);
  EXPECT_EQ(b["data"][1]["object"], "embedding");
  const auto v0 = b["data"][0]["embedding"].get<std::vector<float>>();
  ASSERT_EQ(v0.size(), 4u);
  EXPECT_FLOAT_EQ(v0[2], 12.0f / 13.0f);
  EXPECT_EQ(b["data"][1]["embedding"].get<std::vector<float>>(), (std::vector<float>{0, 0, 0, 1}));
  // dimensions: the first N, re-normalised; base64 carries the same floats.
  r = parse({{"input", {"ab", "c"}}, {"dimensions", 2}, {"model", "asked"}});
  b = embeddings_body(r, pooled, "served");
  EXPECT_EQ(b["model"], "asked");
  const auto cut = b["data"][0]["embedding"].get<std::vector<float>>();
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_FLOAT_EQ(cut[0], 0.6f);
  EXPECT_FLOAT_EQ(cut[1], 0.8f);
  r.base64 = true;
  const json b64 = embeddings_body(r, pooled, "served");
  EXPECT_EQ(from_base64(b64["data"][0]["embedding"].get<std::string>()), cut);
  // JSON floats are the shortest spelling that reads back as the same float.
  EXPECT_EQ(b["data"][0]["embedding"].dump(), "[0.6,0.8]");
}

}  // namespace
}  // namespace tern::server
