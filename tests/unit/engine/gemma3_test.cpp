// Gemma 3 270M Q4_K_M (the suite's second model, fetched by scripts/setup.sh)
// against native llama.cpp on the same file. tests/fixtures/gemma3_golden.json
// was produced by scripts/gen_gemma3_golden.py (llama-tokenize and
// llama-perplexity; its "generator" field records the calls): token ids of
// the tokenizer suite's texts, and the perplexity of
// tests/fixtures/perplexity_text.txt at contexts 512 and 1024 (1024 crosses
// the 512-token sliding window of the local layers).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tern/engine/engine.h"
#include "tern/model/config.h"
#include "tern/tokenizer/chat_template.h"
#include "tern/tokenizer/tokenizer.h"
#include "testutil.h"

namespace tern {
namespace {

class Gemma3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!test::file_exists(test::gemma3_model_path())) return;
    EngineOptions o;
    o.model_path = test::gemma3_model_path();
    o.n_ctx = 1024;
    o.max_seqs = 2;
    o.kv_type = kv::KvType::F16;  // llama-perplexity's default cache
    o.kv_flash_mb = 0;
    engine_ = Engine::load(o).release();
    std::ifstream in(test::fixture_path("gemma3_golden.json"));
    golden_ = new nlohmann::json(nlohmann::json::parse(in));
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete golden_;
    engine_ = nullptr;
  }
  void SetUp() override {
    if (!engine_) GTEST_SKIP() << "Gemma 3 model not found: run scripts/setup.sh";
  }

  // Running perplexity after each chunk, as llama-perplexity prints it: chunks
  // of ctx tokens from an empty cache, BOS first, the second half scored.
  static std::vector<double> perplexity(int ctx, int max_chunks) {
    std::ifstream in(test::fixture_path("perplexity_text.txt"));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const Tokenizer& tok = engine_->tokenizer();
    const auto ids = tok.encode(text, tok.add_bos_default(), false);
    const int n_chunks = std::min(max_chunks, int(ids.size()) / ctx);
    std::vector<double> running;
    double nll = 0;
    int count = 0;
    StepOutput out;
    for (int c = 0; c < n_chunks; ++c) {
      std::vector<int32_t> chunk(ids.begin() + c * ctx, ids.begin() + (c + 1) * ctx);
      if (tok.add_bos_default()) chunk[0] = tok.bos();
      const SeqId s = engine_->new_sequence();
      Batch b;
      b.entries = {{s, chunk, LogitsMode::All}};
      engine_->step(b, out);
      engine_->free_sequence(s);
      for (int pos = ctx / 2; pos < ctx - 1; ++pos) {
        const auto row = out.row(pos);
        const float mx = *std::max_element(row.begin(), row.end());
        double sum = 0;
        for (float v : row) sum += std::exp(double(v) - mx);
        nll += std::log(sum) - (double(row[size_t(chunk[size_t(pos + 1)])]) - mx);
        ++count;
      }
      running.push_back(std::exp(nll / count));
    }
    return running;
  }

  static Engine* engine_;
  static nlohmann::json* golden_;
};
Engine* Gemma3::engine_ = nullptr;
nlohmann::json* Gemma3::golden_ = nullptr;

TEST_F(Gemma3, ConfigFromMetadata) {
  const ModelConfig& c = engine_->config();
  EXPECT_EQ(c.arch, "gemma3");
  EXPECT_EQ(c.n_layers, 18);
  EXPECT_EQ(c.d_model, 640);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.n_vocab, 262144);
  EXPECT_TRUE(c.qk_norm && c.post_norms && c.tied_embeddings);
  EXPECT_EQ(c.act, Activation::GeluTanh);
  EXPECT_FLOAT_EQ(c.embed_scale, std::sqrt(640.0f));
  EXPECT_EQ(c.sliding_window, 512);
  // Every 6th layer is global (RoPE base 1e6, no window); the rest are local.
  for (int l = 0; l < c.n_layers; ++l) {
    const bool global = l % 6 == 5;
    EXPECT_EQ(c.layer_window(l), global ? 0 : 512) << l;
    EXPECT_FLOAT_EQ(c.layer_rope_theta(l), global ? 1e6f : 1e4f) << l;
  }
  EXPECT_FLOAT_EQ(c.q_scale(), 1.0f / 16.0f);
}

// The base model's file has no tokenizer.chat_template: tern uses Gemma's
// turns (whose markers are control tokens of its vocabulary), not ChatML.
TEST_F(Gemma3, ChatTemplateIsGemmasTurns) {
  const ChatTemplate& t = engine_->chat_template();
  EXPECT_EQ(t.kind(), ChatTemplate::Kind::Gemma);
  const std::vector<ChatMessage> msgs{{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(t.apply(msgs, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  const auto ids = engine_->tokenizer().encode("<start_of_turn>", false, true);
  ASSERT_EQ(ids.size(), 1u);  // one control token
}

TEST_F(Gemma3, TokenizationMatchesLlamaCpp) {
  const auto& g = *golden_;
  EXPECT_EQ(g["generator"]["model_file"].get<std::string>(), "gemma-3-270m-it-Q4_K_M.gguf");
  int n = 0;
  for (const auto& c : g["tokenize"]) {
    std::string text;
    if (c.contains("text_hex")) {
      const std::string hex = c["text_hex"].get<std::string>();
      for (size_t i = 0; i + 1 < hex.size(); i += 2)
        text += char(std::stoi(hex.substr(i, 2), nullptr, 16));
    } else {
      text = c["text"].get<std::string>();
    }
    const auto got = engine_->tokenizer().encode(text, false, false);
    EXPECT_EQ(got, c["ids"].get<std::vector<int32_t>>()) << c["name"].get<std::string>();
    ++n;
  }
  EXPECT_GT(n, 100);
}

// Perplexity within 1% of llama.cpp's over the whole fixture text (the
// issue's criterion: one 512-token chunk alone moves by about 1% with the
// rounding order of the attention kernels); at ctx 1024 the local layers'
// window cuts the context of the scored half.
TEST_F(Gemma3, PerplexityWithinOnePercentOfLlamaCpp) {
  for (const char* ctx : {"512", "1024"}) {
    const double ref = (*golden_)["perplexity"][ctx]["final"].get<double>();
    const auto got = perplexity(std::stoi(ctx), 1 << 20);
    ASSERT_EQ(got.size(), (*golden_)["perplexity"][ctx]["chunks"].size());
    EXPECT_NEAR(got.back(), ref, 0.01 * ref) << "ctx " << ctx;
    std::printf("gemma3 ppl ctx %s, %zu chunks: tern %.4f llama.cpp %.4f (%+.2f%%)\n", ctx,
                got.size(), got.back(), ref, 100.0 * (got.back() / ref - 1.0));
  }
}

// Greedy agreement with llama.cpp on the real file, teacher-forced as for
// SmolLM2 (golden_test.cpp): llama.cpp's own continuation
// (tests/fixtures/gemma3_greedy.json, scripts/gen_gemma3_greedy.py) is fed in
// one pass and tern's argmax compared at every position; a disagreement is
// allowed only where llama.cpp's top-1/top-2 margin was a near-tie.
TEST_F(Gemma3, TeacherForcedGreedyAgreesWithLlamaCpp) {
  std::ifstream in(test::fixture_path("gemma3_greedy.json"));
  const auto fixture = nlohmann::json::parse(in);
  // tern's argmax after each of the n last tokens of `fed`, in one pass.
  auto argmax_tail = [](const std::vector<int32_t>& fed, size_t n) {
    StepOutput out;
    Batch b;
    b.entries = {{engine_->new_sequence(), fed, LogitsMode::All}};
    engine_->step(b, out);
    engine_->free_sequence(b.entries[0].seq);
    std::vector<int32_t> top;
    for (size_t r = fed.size() - n; r < fed.size(); ++r) {
      const auto row = out.row(int(r));
      top.push_back(int32_t(std::max_element(row.begin(), row.end()) - row.begin()));
    }
    return top;
  };
  int agree = 0, total = 0;
  for (const auto& g : fixture["greedy"]) {
    std::vector<int32_t> fed = g["prompt_ids"];
    EXPECT_EQ(engine_->tokenizer().encode(g["prompt"].get<std::string>(), true, true), fed);
    const std::vector<int32_t> want = g["tokens"];
    fed.insert(fed.end(), want.begin(), want.end() - 1);
    const auto got = argmax_tail(fed, want.size());
    for (size_t i = 0; i < want.size(); ++i, ++total) {
      agree += got[i] == want[i];
      if (got[i] != want[i]) {
        EXPECT_LT(g["margins"][i].get<float>(), 1.0f) << "position " << i << " of " << g["prompt"];
      }
    }
  }
  std::printf("gemma3 teacher-forced greedy agreement with llama.cpp: %d / %d tokens (%.1f%%)\n",
              agree, total, 100.0 * agree / total);
  EXPECT_GE(agree, total * 9 / 10);
}

}  // namespace
}  // namespace tern
