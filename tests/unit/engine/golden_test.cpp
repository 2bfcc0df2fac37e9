// The engine as a whole against llama.cpp on the same GGUF file.
// tests/fixtures/engine_golden.json was produced by scripts/gen_engine_golden.py
// (llama.cpp through llama-cpp-python; its "how" field records the settings):
// prompt token ids, greedy continuations with their top-1/top-2 logit margins,
// top-5 logits at the end of three prompts, and the perplexity of
// tests/fixtures/perplexity_text.txt at context 512.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "tern/engine/engine.h"
#include "tern/tokenizer/tokenizer.h"
#include "testutil.h"

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
    o.kv_type = kv::KvType::F16;  // llama.cpp's golden values come from an f16 KV cache
    o.kv_flash_mb = 0;
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

// A prompt shown on one line: newlines escaped, cut to 40 bytes.
std::string one_line(const std::string& s) {
  std::string r;
  for (char c : s) r += c == '\n' ? std::string("\\n") : std::string(1, c);
  return r.substr(0, 40);
}
nlohmann::json* Golden::golden_ = nullptr;

TEST_F(Golden, PromptTokenizationMatchesLlamaCpp) {
  for (const auto& g : (*golden_)["greedy"]) {
    const auto ids = engine_->tokenizer().encode(g["prompt"].get<std::string>(), false,
                                                 g["parse_special"].get<bool>());
    EXPECT_EQ(ids, g["prompt_ids"].get<std::vector<int32_t>>()) << g["prompt"];
  }
}

// Both engines quantize activations to int8 per group of 32 (W4A8), so both
// carry about 0.1-0.6 logits of RMS noise against exact arithmetic, each its
// own: llama.cpp also rounds activation scales, Q and the softmax weights to
// fp16; tern keeps them in f32. Token-for-token agreement therefore holds until
// the first near-tie. The tests below pin down what must hold regardless:
// disagreements only ever happen where llama.cpp itself saw a near-tie.
constexpr float kNearTie = 1.0f;  // logits

// Teacher forcing: feed llama.cpp's own greedy continuation in one pass and
// compare tern's argmax at every position, so one early near-tie does not
// hide the rest of the sequence.
TEST_F(Golden, TeacherForcedGreedyAgreesWithLlamaCpp) {
  int total = 0, agree = 0;
  for (const auto& g : (*golden_)["greedy"]) {
    const auto prompt = g["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = g["tokens"].get<std::vector<int32_t>>();
    const auto margins = g["margins"].get<std::vector<float>>();
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), want.begin(), want.end() - 1);
    const SeqId s = engine_->new_sequence();
    StepOutput out;
    Batch b;
    b.entries = {{s, seq, LogitsMode::All}};
    engine_->step(b, out);
    engine_->free_sequence(s);
    for (size_t i = 0; i < want.size(); ++i) {
      const auto row = out.row(int(prompt.size() + i - 1));
      const int32_t got = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
      ++total;
      if (got == want[i]) {
        ++agree;
      } else {
        EXPECT_LT(margins[i], kNearTie)
            << g["prompt"] << " position " << i << ": tern " << got << ", llama.cpp " << want[i];
      }
    }
  }
  std::printf("teacher-forced greedy agreement: %d / %d tokens (%.1f%%)\n", agree, total,
              100.0 * agree / total);
  EXPECT_GE(agree, total * 9 / 10);
}

// Free-running greedy generation: identical up to the first near-tie.
TEST_F(Golden, FreeRunningGreedyMatchesUntilANearTie) {
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
    std::printf("%-40s identical for %zu/%zu tokens",
                one_line(g["prompt"].get<std::string>()).c_str(), i, want.size());
    if (i < want.size()) {
      std::printf("; at the first divergence llama.cpp's margin was %.3f, tern's %.3f",
                  ref_margins[i], i < margins.size() ? margins[i] : 0.0f);
      EXPECT_LT(ref_margins[i], kNearTie) << g["prompt"];
    }
    std::printf("\n");
  }
  std::printf("free-running greedy: %d / %d tokens identical before first divergences\n", matched,
              total);
}

// Against the exact (fp64) logits: tern's error is no larger than llama.cpp's.
// Both engines quantize activations to int8, so each prompt's error is mostly
// which int8 roundings a few-ulp difference upstream happens to flip: one
// prompt moved from 0.13 to 0.29 when attention changed from the contiguous to
// the paged f16 kernel (same math, different summation order), another from
// 0.30 to 0.12, and llama.cpp itself scores 0.12..0.59. So each prompt gets a
// loose bound and the mean over prompts is held to llama.cpp's.
TEST_F(Golden, LogitsAsCloseToExactMathAsLlamaCpp) {
  double sum_tern = 0, sum_llama = 0;
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
    const auto ids = g["oracle_ids"].get<std::vector<int32_t>>();
    const auto exact = g["oracle_logits"].get<std::vector<double>>();
    const auto llama = g["llama_logits_at_oracle_ids"].get<std::vector<double>>();
    double err_tern = 0, err_llama = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      err_tern += std::pow(row[size_t(ids[i])] - exact[i], 2);
      err_llama += std::pow(llama[i] - exact[i], 2);
    }
    err_tern = std::sqrt(err_tern / double(ids.size()));
    err_llama = std::sqrt(err_llama / double(ids.size()));
    std::printf("%-28s RMS error vs fp64 over the top-32: tern %.3f, llama.cpp %.3f\n",
                g["prompt"].get<std::string>().c_str(), err_tern, err_llama);
    EXPECT_LT(err_tern, std::max(1.5 * err_llama, 0.4));
    sum_tern += err_tern;
    sum_llama += err_llama;
    // The top-5 ids by llama.cpp are tern's top-5 too, up to near-ties.
    const auto top = g["ids"].get<std::vector<int32_t>>();
    const auto top_logits = g["logits"].get<std::vector<float>>();
    for (size_t i = 0; i < top.size(); ++i) {
      EXPECT_NEAR(row[size_t(top[i])], top_logits[i], kNearTie) << g["prompt"] << " id " << top[i];
    }
  }
  std::printf("summed RMS error: tern %.3f, llama.cpp %.3f\n", sum_tern, sum_llama);
  EXPECT_LT(sum_tern, 1.1 * sum_llama);
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
