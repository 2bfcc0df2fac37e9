// The engine as a whole against llama.cpp on the same GGUF file.
// tests/fixtures/engine_golden.json was produced by scripts/gen_engine_golden.py
// (llama.cpp through llama-cpp-python; its "how" field records the settings):
// prompt token ids, greedy continuations with their top-1/top-2 logit margins,
// top-5 logits at the end of three prompts, and the perplexity of
// tests/fixtures/perplexity_text.txt at context 512.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <numeric>
#include <nlohmann/json.hpp>

#include "testutil.h"
#include "tern/engine/engine.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {
namespace {

class Golden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!test::file_exists(test::default_model_path())) return;
    EngineOptions o;
    o.model_path = test::default_model_path();
    o.n_ctx = 1024;
    o.max_seqs = 4;
    engine_ = Engine::load(o).release();
    std::ifstream in(test::fixture_path("engine_golden.json"));
    golden_ = new nlohmann::json(nlohmann::json::parse(in));
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete golden_;
    engine_ = nullptr;
  }
  void SetUp() override {
    if (!engine_) GTEST_SKIP() << "default model not found: run scripts/setup.sh";
  }

  // Greedy continuation of `prompt` for up to n tokens (EOS included, then stop).
  static std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, size_t n,
                                     std::vector<float>* margins) {
    const SeqId s = engine_->new_sequence();
    StepOutput out;
    Batch b;
    b.entries = {{s, prompt, LogitsMode::Last}};
    engine_->step(b, out);
    std::vector<int32_t> toks;
    int32_t next = 0;
    while (toks.size() < n) {
      auto row = out.last(0);
      const auto best = std::max_element(row.begin(), row.end());
      next = int32_t(best - row.begin());
      float second = -INFINITY;
      for (size_t i = 0; i < row.size(); ++i) {
        if (int32_t(i) != next) second = std::max(second, row[i]);
      }
      if (margins) margins->push_back(*best - second);
      toks.push_back(next);
      if (engine_->tokenizer().is_eog(next)) break;
      b.entries[0].tokens = {&next, 1};
      engine_->step(b, out);
    }
    engine_->free_sequence(s);
    return toks;
  }

  static Engine* engine_;
  static nlohmann::json* golden_;
};
Engine* Golden::engine_ = nullptr;
nlohmann::json* Golden::golden_ = nullptr;

TEST_F(Golden, PromptTokenizationMatchesLlamaCpp) {
  for (const auto& g : (*golden_)["greedy"]) {
    const auto ids = engine_->tokenizer().encode(g["prompt"].get<std::string>(), false,
                                                 g["parse_special"].get<bool>());
    EXPECT_EQ(ids, g["prompt_ids"].get<std::vector<int32_t>>()) << g["prompt"];
  }
}

TEST_F(Golden, GreedyContinuationsMatchLlamaCpp) {
  int total = 0, matched = 0;
  for (const auto& g : (*golden_)["greedy"]) {
    const auto want = g["tokens"].get<std::vector<int32_t>>();
    const auto ref_margins = g["margins"].get<std::vector<float>>();
    std::vector<float> margins;
    const auto got = greedy(g["prompt_ids"].get<std::vector<int32_t>>(), want.size(), &margins);
    size_t i = 0;
    while (i < want.size() && i < got.size() && got[i] == want[i]) ++i;
    total += int(want.size());
    matched += int(i);
    EXPECT_EQ(got, want) << "prompt " << g["prompt"] << ": first divergence at token " << i
                         << " (llama.cpp margin there " << (i < ref_margins.size() ? ref_margins[i] : 0)
                         << ", tern margin " << (i < margins.size() ? margins[i] : 0) << ")\n"
                         << "llama.cpp: " << g["text"] << "\ntern: "
                         << engine_->tokenizer().decode(got);
  }
  std::printf("greedy agreement: %d / %d tokens\n", matched, total);
}

TEST_F(Golden, Top5LogitsMatchLlamaCpp) {
  for (const auto& g : (*golden_)["top5"]) {
    const auto prompt = g["prompt_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(engine_->tokenizer().encode(g["prompt"].get<std::string>(), false, false), prompt);
    const SeqId s = engine_->new_sequence();
    StepOutput out;
    Batch b;
    b.entries = {{s, prompt, LogitsMode::Last}};
    engine_->step(b, out);
    engine_->free_sequence(s);
    const auto row = out.last(0);
    const auto ids = g["ids"].get<std::vector<int32_t>>();
    const auto logits = g["logits"].get<std::vector<float>>();
    for (size_t i = 0; i < ids.size(); ++i) {
      // Both engines use W4A8 block arithmetic; what differs is float summation
      // order and fp16 rounding of intermediate values.
      EXPECT_NEAR(row[size_t(ids[i])], logits[i], 0.05f) << g["prompt"] << " id " << ids[i];
    }
    // The top-5 ranking agrees (ties within 0.05 may swap).
    std::vector<int32_t> order(row.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                      [&](int a, int c) { return row[size_t(a)] > row[size_t(c)]; });
    for (size_t i = 0; i < 5; ++i) {
      if (order[i] != ids[i]) {
        EXPECT_NEAR(row[size_t(order[i])], row[size_t(ids[i])], 0.05f) << "rank " << i;
      }
    }
  }
}

TEST_F(Golden, PerplexityWithinOnePercentOfLlamaCpp) {
  const auto& p = (*golden_)["perplexity"];
  std::ifstream in(test::source_dir() + "/" + p["file"].get<std::string>());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto ids = engine_->tokenizer().encode(text, false, false);
  ASSERT_EQ(int(ids.size()), p["tokens"].get<int>());
  const int ctx = p["ctx"].get<int>(), first = ctx / 2;
  double nll = 0;
  int count = 0;
  StepOutput out;
  for (int c = 0; c < p["chunks"].get<int>(); ++c) {
    const std::vector<int32_t> chunk(ids.begin() + c * ctx, ids.begin() + (c + 1) * ctx);
    const SeqId s = engine_->new_sequence();
    Batch b;
    b.entries = {{s, chunk, LogitsMode::All}};
    engine_->step(b, out);
    engine_->free_sequence(s);
    for (int j = first; j < ctx - 1; ++j) {
      const auto row = out.row(j);
      const float mx = *std::max_element(row.begin(), row.end());
      double sum = 0;
      for (float v : row) sum += std::exp(double(v) - mx);
      nll += std::log(sum) - (double(row[size_t(chunk[size_t(j + 1)])]) - mx);
      ++count;
    }
  }
  const double ppl = std::exp(nll / count), want = p["value"].get<double>();
  std::printf("perplexity: tern %.4f, llama.cpp %.4f (%.3f%%)\n", ppl, want,
              100.0 * (ppl - want) / want);
  EXPECT_NEAR(ppl, want, 0.01 * want);
}

}  // namespace
}  // namespace tern
