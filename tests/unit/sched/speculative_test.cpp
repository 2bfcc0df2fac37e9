// Speculative decoding by prompt lookup: the guesses, and the scheduler's
// outputs with guesses checked in verify entries against plain decoding, on
// the generated tiny model (tiny_engine.h): always runs.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../../../src/sched/drafter.h"
#include "collector.h"
#include "tern/core/error.h"
#include "tern/engine/engine.h"
#include "tern/kv/paged_kv.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/tokenizer.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

using testutil::Collector;

std::vector<int32_t> propose(const std::vector<int32_t>& tokens, int k) {
  std::vector<int32_t> out;
  NgramDrafter::propose(tokens, k, out);
  return out;
}

TEST(NgramDrafter, ProposesWhatFollowedTheMostRecentMatch) {
  // ... 1 2 3 [9] ... 1 2 3 [7 8] ... 1 2 3 -> what followed the latest "1 2 3".
  const std::vector<int32_t> t = {1, 2, 3, 9, 5, 1, 2, 3, 7, 8, 6, 1, 2, 3};
  EXPECT_EQ(propose(t, 2), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(propose(t, 4), (std::vector<int32_t>{7, 8, 6, 1}));
  // Longer matches first: "4 2 3" occurs nowhere, "2 3" after a 5 does.
  const std::vector<int32_t> u = {5, 2, 3, 11, 1, 2, 3, 12, 4, 2, 3};
  EXPECT_EQ(propose(u, 1), (std::vector<int32_t>{12}));
  EXPECT_TRUE(propose({1, 2, 3, 4, 5}, 4).empty()) << "nothing repeats";
  EXPECT_TRUE(propose({1, 2, 1, 2}, 0).empty()) << "k = 0";
  // A run: the token repeats itself.
  EXPECT_EQ(propose({4, 4, 4, 4}, 3), (std::vector<int32_t>{4}));
  // Only within the lookback.
  std::vector<int32_t> far = {7, 8, 9};
  far.resize(NgramDrafter::kMaxLookback + 10, 0);
  for (size_t i = 3; i < far.size(); ++i) far[i] = int32_t(100 + i % 50000);
  far.push_back(7);
  far.push_back(8);
  EXPECT_TRUE(propose(far, 2).empty());
}

std::vector<int32_t> predict(const std::vector<int32_t>& output,
                             const std::vector<int32_t>& prediction, size_t& cursor, int k) {
  std::vector<int32_t> out;
  PredictionDrafter::propose(output, prediction, cursor, k, out);
  return out;
}

// DraftLength: long guesses for a lone stream whose guesses are kept, short
// or none when they are not or when a guess costs as much as the batch gains.
TEST(DraftLength, WeighsWhatGuessesYieldAgainstWhatTheyCost) {
  DraftLength kept;
  for (int i = 0; i < 20; ++i) kept.observe(8, 8);
  EXPECT_GT(kept.acceptance(), 0.95);
  EXPECT_EQ(kept.choose(16, 1, 0.05), 16) << "every guess kept, verify nearly free";
  const int lone = kept.choose(16, 1, 0.3);
  EXPECT_GT(lone, 2);
  EXPECT_LE(kept.choose(16, 16, 0.3), lone) << "sixteen streams gain less from one's guesses";

  DraftLength missed;
  for (int i = 0; i < 20; ++i) missed.observe(4, 0);
  EXPECT_LT(missed.acceptance(), 0.1);
  EXPECT_EQ(missed.choose(16, 1, 0.1), 0) << "guesses never kept: none";
  // ... but after kProbeAfter steps without a guess, one is tried.
  int probes = 0;
  for (int i = 0; i < 2 * DraftLength::kProbeAfter; ++i) probes += missed.choose(16, 1, 0.1);
  EXPECT_EQ(probes, 2);
  // A sequence that starts being copyable again gets its guesses back.
  for (int i = 0; i < 30; ++i) missed.observe(1, 1);
  EXPECT_GT(missed.choose(16, 1, 0.1), 1);

  // Half the guesses kept: a few, fewer as a guess costs more, none at batch 16.
  DraftLength half;
  for (int i = 0; i < 40; ++i) half.observe(2, i % 2 ? 2 : 0);
  const int cheap = half.choose(16, 1, 0.05), dear = half.choose(16, 1, 0.4);
  EXPECT_GE(cheap, dear);
  EXPECT_GT(cheap, 0);
  EXPECT_EQ(half.choose(16, 16, 0.4), 0);
  EXPECT_EQ(half.choose(0, 1, 0.05), 0) << "k_max bounds it";
}

// BatchEntry::skip: tokens fed one a pass after the uncommitted positions the
// passes before wrote give the logits of feeding them all at once (what the
// draft model relies on to guess k tokens for k tokens of work); nothing is
// committed, so the next commit starts where the last one ended.
TEST(SkipEntry, ExtendingUncommittedPositionsEqualsFeedingThemAgain) {
  const auto engine = Engine::load(testutil::tiny_engine_options(1024, 4));
  Engine& e = *engine;
  std::vector<int32_t> prompt;  // past one attention segment (512): the split-K path too
  for (int i = 0; i < 600; ++i) prompt.push_back(int32_t(3 + (i * 7 + i / 13) % 120));
  const std::vector<int32_t> tail = {60, 61, 62, 63, 64, 65};
  const auto head = std::span<const int32_t>(prompt).first(560);
  const auto rest = std::span<const int32_t>(prompt).subspan(560);
  StepOutput out;
  std::vector<std::vector<float>> whole;  // tail fed at once: every row
  {
    const SeqId s = e.new_sequence();
    Batch b;
    b.entries.push_back({s, std::span<const int32_t>(prompt), LogitsMode::None});
    e.step(b, out);
    b.entries[0] = {s, std::span<const int32_t>(tail), LogitsMode::All};
    b.entries[0].commit = false;
    e.step(b, out);
    for (int r = 0; r < int(tail.size()); ++r) {
      const auto row = out.row(out.first_row[0] + r);
      whole.emplace_back(row.begin(), row.end());
    }
    e.free_sequence(s);
  }
  // As the draft model feeds: the context's end and the first new token
  // uncommitted, the context committed after the step, then one token a pass.
  const SeqId s = e.new_sequence();
  Batch b;
  b.entries.push_back({s, head, LogitsMode::None});
  e.step(b, out);
  std::vector<int32_t> first(rest.begin(), rest.end());
  first.push_back(tail[0]);
  b.entries[0] = {s, std::span<const int32_t>(first), LogitsMode::Last};
  b.entries[0].commit = false;
  e.step(b, out);
  e.commit(s, rest);
  auto check = [&](size_t i) {
    const auto row = out.last(0);
    ASSERT_EQ(row.size(), whole[i].size());
    for (size_t v = 0; v < row.size(); ++v)
      ASSERT_NEAR(row[v], whole[i][v], 1e-4f * (1.0f + std::fabs(whole[i][v]))) << i << " " << v;
    EXPECT_EQ(e.seq_len(s), int(prompt.size()));
  };
  check(0);
  for (size_t i = 1; i < tail.size(); ++i) {
    b.entries[0] = {s, std::span<const int32_t>(tail).subspan(i, 1), LogitsMode::Last};
    b.entries[0].commit = false;
    b.entries[0].skip = int(i);
    e.step(b, out);
    check(i);
  }
  // A skipping entry that would commit is refused before anything changes.
  b.entries[0] = {s, std::span<const int32_t>(tail).first(1), LogitsMode::Last};
  b.entries[0].skip = 1;
  EXPECT_THROW(e.step(b, out), InvalidArgument);
  EXPECT_EQ(e.seq_len(s), int(prompt.size()));
  e.free_sequence(s);
}

TEST(PredictionDrafter, FollowsTheOutputThroughThePrediction) {
  const std::vector<int32_t> pred = {10, 11, 12, 13, 14, 15, 16, 17, 12, 13, 20, 21};
  size_t cursor = 0;
  // Before the first token: the prediction's start.
  EXPECT_EQ(predict({}, pred, cursor, 3), (std::vector<int32_t>{10, 11, 12}));
  // On track: what follows.
  EXPECT_EQ(predict({10, 11, 12}, pred, cursor, 2), (std::vector<int32_t>{13, 14}));
  EXPECT_EQ(cursor, 3u);
  // "12 13" occurs twice: the one after the cursor is the one that follows.
  EXPECT_EQ(predict({10, 11, 12, 13, 14, 15, 16, 17, 12, 13}, pred, cursor, 4),
            (std::vector<int32_t>{20, 21}));
  EXPECT_EQ(cursor, 10u);
  // The output left the prediction (an edit): nothing to guess...
  size_t c2 = 3;
  EXPECT_TRUE(predict({10, 11, 12, 99, 98}, pred, c2, 4).empty());
  // ... until it joins it again, even a single token just ahead.
  EXPECT_EQ(predict({10, 11, 12, 99, 98, 15}, pred, c2, 2), (std::vector<int32_t>{16, 17}));
  // A single token far away is no evidence.
  size_t c3 = 0;
  std::vector<int32_t> long_pred(100, 1);
  long_pred[80] = 7;
  long_pred[81] = 8;
  EXPECT_TRUE(predict({5, 7}, long_pred, c3, 2).empty());
  // Nothing left after the match.
  size_t c4 = 0;
  EXPECT_TRUE(predict({20, 21}, pred, c4, 2).empty());
}

class Speculative : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o = testutil::tiny_engine_options(1024, 16);
    engine_ = Engine::load(o).release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }

  struct Run {
    std::vector<std::string> texts;
    int draft_n = 0, accepted = 0;
    int prediction_accepted = 0, prediction_rejected = 0;
  };

  // Every prompt at once (max_batch of them decode together).
  // predictions[i]: request i's Predicted Outputs text (none if absent).
  // draft: a draft model (on engine_'s pool), with guesses from `source`.
  Run run(const std::vector<std::string>& prompts, const SamplingParams& p, int draft_max,
          int max_batch, int spec_max_batch = 4, const std::vector<std::string>& predictions = {},
          Engine* draft = nullptr, SpecSource source = SpecSource::Auto) {
    SchedulerOptions o;
    o.max_batch = max_batch;
    o.step_tokens = 64;
    o.draft_max = draft_max;
    o.spec_max_batch = spec_max_batch;
    o.spec_cost_ratio = DraftLength::kDefaultCostRatio;  // guess lengths independent of timing
    o.draft = draft;
    o.spec_source = source;
    Scheduler s(*engine_, o, metrics_);
    std::vector<std::unique_ptr<Collector>> cs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      cs.push_back(std::make_unique<Collector>());
      Request r;
      r.id = "r" + std::to_string(i);
      r.prompt = engine_->tokenizer().encode(prompts[i], true, false);
      r.params = p;
      r.params.seed = p.seed + i;
      r.stream = cs.back()->stream();
      if (i < predictions.size())
        r.prediction = engine_->tokenizer().encode(predictions[i], false, false);
      EXPECT_EQ(s.submit(std::move(r)), SubmitStatus::Accepted);
    }
    s.start();
    Run out;
    for (auto& c : cs) {
      const Finish f = c->wait();
      EXPECT_NE(f.reason, FinishReason::Error) << f.error;
      out.texts.push_back(c->text());
      out.draft_n += f.timings.draft_n;
      out.accepted += f.timings.draft_accepted_n;
      out.prediction_accepted += f.usage.accepted_prediction_tokens;
      out.prediction_rejected += f.usage.rejected_prediction_tokens;
      EXPECT_EQ(f.usage.accepted_prediction_tokens, f.timings.prediction_accepted_n);
    }
    s.stop();
    engine_->kv().check_invariants();
    if (draft) {
      draft->kv().check_invariants();
      EXPECT_EQ(draft->free_sequences(), draft_seqs) << "the draft model's KV leaked";
    }
    return out;
  }

  // Every prompt alone (one at a time) with and without guesses: the texts
  // must be equal. Returns the guesses kept.
  int same_with_and_without(const SamplingParams& p) {
    const Run off = run(prompts_, p, 0, 1);
    const Run on = run(prompts_, p, 8, 1);
    EXPECT_EQ(on.texts, off.texts);
    return on.accepted;
  }

  static SamplingParams params(float temperature, int max_tokens) {
    SamplingParams p;
    p.temperature = temperature;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;  // every run at full length
    p.seed = 42;
    return p;
  }

  // Prompts full of text to copy; a random model's greedy output also
  // settles into loops, which prompt lookup then predicts.
  const std::vector<std::string> prompts_ = {
      "abc abc abc abc abc abc",
      "the cat sat on the mat. the cat sat on the",
      "1, 2, 3, 1, 2, 3, 1, 2,",
      "def f(x): return x\ndef g(x): return",
      "Hello",
      "{\"a\": 1, \"b\": 2, \"a\": 1,",
  };
  // A draft model on the target's pool: the tiny model itself (seed 7: its
  // greedy guesses are the target's own tokens) or another with the same
  // vocabulary and other weights.
  static std::unique_ptr<Engine> load_draft(uint32_t seed) {
    test::TinyModelSpec spec = testutil::sched_model_spec();
    spec.seed = seed;
    EngineOptions o = testutil::tiny_engine_options(1024, draft_seqs);
    if (seed != spec_seed())
      o.model_path =
          test::write_tiny_model(spec, "sched_tiny_draft" + std::to_string(seed) + ".gguf");
    o.pool = &engine_->pool();
    o.kv_flash_mb = 0;
    o.prefix_reuse = false;
    return Engine::load(o);
  }
  static uint32_t spec_seed() { return testutil::sched_model_spec().seed; }
  static constexpr int draft_seqs = 8;

  static inline Engine* engine_ = nullptr;
  Metrics metrics_;
};

TEST_F(Speculative, GreedyTextIsUnchangedAndGuessesAreKept) {
  const SamplingParams p = params(0, 64);
  for (size_t i = 0; i < prompts_.size(); ++i) {
    const Run off = run({prompts_[i]}, p, 0, 1);
    const Run on = run({prompts_[i]}, p, 8, 1);
    EXPECT_EQ(on.texts[0], off.texts[0]) << prompts_[i];
    EXPECT_EQ(off.draft_n, 0);
  }
  const Run all = run(prompts_, p, 8, 1);
  EXPECT_GT(all.draft_n, 0) << "prompt lookup found nothing to guess";
  EXPECT_GT(all.accepted, 0) << "no guess was ever kept: the test would not see a verify";
  EXPECT_GT(metrics_.draft_accepted_tokens.load(), 0u);
}

TEST_F(Speculative, SeededSamplingIsUnchanged) {
  // A temperature low enough that the random model still falls into loops
  // (guesses are made and some kept), through the sampling path (a random
  // draw per token, top-k and top-p).
  SamplingParams p = params(0.1f, 64);
  p.top_k = 10;
  p.top_p = 0.95f;
  EXPECT_GT(same_with_and_without(p), 0);
  // With the penalties, which read the history each verify row extends.
  // (Light, over a short window: strong penalties break the loops.)
  p.repeat_penalty = 1.05f;
  p.repeat_last_n = 4;
  EXPECT_GT(same_with_and_without(p), 0);
  // Hot, penalties strong: guesses rarely survive, and nothing changes.
  p.temperature = 0.9f;
  p.repeat_penalty = 1.2f;
  p.repeat_last_n = 64;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.3f;
  EXPECT_EQ(run(prompts_, p, 8, 1).texts, run(prompts_, p, 0, 1).texts);
}

TEST_F(Speculative, AmongOtherSequencesAndWithTinyKvTheTextIsUnchanged) {
  // Six sequences decode together, speculation allowed at that batch; the
  // verify entries share steps with decodes and prefill chunks.
  const SamplingParams p = params(0, 40);
  const Run off = run(prompts_, p, 0, 6);
  const Run on = run(prompts_, p, 8, 6, /*spec_max_batch=*/8);
  EXPECT_EQ(on.texts, off.texts);
  EXPECT_GT(on.accepted, 0);
  // Above spec_max_batch nobody guesses.
  const Run gated = run(prompts_, p, 8, 6, /*spec_max_batch=*/2);
  EXPECT_EQ(gated.texts, off.texts);
  EXPECT_EQ(gated.draft_n, 0);
}

TEST_F(Speculative, MaxTokensAndTheContextBoundTheGuesses) {
  // max_tokens 5: a verify never produces a sixth token.
  const Run on = run(prompts_, params(0, 5), 8, 1);
  for (const std::string& t : on.texts) EXPECT_LE(t.size(), 5u * 4);
  const Run off = run(prompts_, params(0, 5), 0, 1);
  EXPECT_EQ(on.texts, off.texts);
}

TEST_F(Speculative, APredictionIsGuessedFromAndTheTextIsUnchanged) {
  const SamplingParams p = params(0, 48);
  const std::vector<std::string> prompts = {"Hello", "def f(x): return x"};
  const Run off = run(prompts, p, 0, 1);
  // The exact answer as the prediction: nearly every token is a kept guess.
  const Run exact = run(prompts, p, 16, 1, 4, off.texts);
  EXPECT_EQ(exact.texts, off.texts);
  // (96 tokens in all; 71 came as kept guesses when this was written.)
  EXPECT_GT(exact.prediction_accepted, 48) << "a perfect prediction was mostly thrown away";
  // An edited answer (a middle part replaced): still the same text, guesses
  // kept before and after the edit, some thrown away at it.
  std::vector<std::string> edited = off.texts;
  for (std::string& t : edited)
    t = t.substr(0, t.size() / 3) + " zzz qqq " + t.substr(t.size() / 2);
  const Run edit = run(prompts, p, 16, 1, 4, edited);
  EXPECT_EQ(edit.texts, off.texts);
  EXPECT_GT(edit.prediction_accepted, 0);
  EXPECT_GT(edit.prediction_rejected, 0);
  // Unrelated text: nothing changes either.
  const Run wrong = run(prompts, p, 16, 1, 4, {"zebra quartz", "lorem ipsum dolor"});
  EXPECT_EQ(wrong.texts, off.texts);
  // Speculation off: the prediction is not used.
  const Run spec_off = run(prompts, p, 0, 1, 4, off.texts);
  EXPECT_EQ(spec_off.texts, off.texts);
  EXPECT_EQ(spec_off.prediction_accepted + spec_off.prediction_rejected, 0);
}

TEST_F(Speculative, ADraftModelGuessesAndTheTextIsUnchanged) {
  const SamplingParams p = params(0, 48);
  const Run off = run(prompts_, p, 0, 1);
  // The model drafting for itself: its greedy guesses are the target's
  // tokens, so nearly all are kept (a guess is extended only while the
  // draft is sure of it, so some steps guess one token).
  auto self = load_draft(spec_seed());
  const Run same = run(prompts_, p, 8, 1, 4, {}, self.get(), SpecSource::Draft);
  EXPECT_EQ(same.texts, off.texts);
  EXPECT_GT(same.draft_n, 48) << "the draft model was not asked";
  EXPECT_EQ(same.accepted, same.draft_n) << "a model drafting for itself had a guess rejected";
  // Another model with the same vocabulary: worse guesses, the same text;
  // alone and among other sequences, with prompt lookup first (auto), and
  // with seeded sampling.
  auto other = load_draft(99);
  const Run d = run(prompts_, p, 8, 1, 4, {}, other.get(), SpecSource::Draft);
  EXPECT_EQ(d.texts, off.texts);
  EXPECT_GT(d.draft_n, 0);
  EXPECT_LT(d.accepted, d.draft_n);
  EXPECT_EQ(run(prompts_, p, 8, 6, 8, {}, other.get(), SpecSource::Draft).texts,
            run(prompts_, p, 0, 6).texts);
  EXPECT_EQ(run(prompts_, p, 8, 6, 8, {}, self.get(), SpecSource::Auto).texts,
            run(prompts_, p, 0, 6).texts);
  SamplingParams hot = params(0.7f, 32);
  hot.top_k = 20;
  EXPECT_EQ(run(prompts_, hot, 8, 3, 4, {}, self.get()).texts, run(prompts_, hot, 0, 3).texts);
  // Ngram: prompt lookup alone (the draft model is loaded, not asked).
  const Run ngram = run(prompts_, p, 8, 1, 4, {}, self.get(), SpecSource::Ngram);
  EXPECT_EQ(ngram.texts, off.texts);
  EXPECT_LT(ngram.draft_n, same.draft_n);
}

TEST_F(Speculative, ADraftModelWithAnotherVocabularyIsRefused) {
  test::TinyModelSpec spec = testutil::sched_model_spec();
  spec.n_vocab = 140;
  EngineOptions o = testutil::tiny_engine_options(1024, 4);
  o.model_path = test::write_tiny_model(spec, "sched_tiny_vocab140.gguf");
  o.pool = &engine_->pool();
  auto wide = Engine::load(o);
  const std::string why = vocabulary_mismatch(engine_->tokenizer(), wide->tokenizer());
  EXPECT_NE(why.find("131 tokens against 140"), std::string::npos) << why;
  SchedulerOptions so;
  so.draft_max = 8;
  so.draft = wide.get();
  EXPECT_THROW(Scheduler(*engine_, so, metrics_), InvalidArgument);
  // A draft model on a pool of its own is refused too (two pools would
  // fight over the cores).
  EngineOptions own = testutil::tiny_engine_options(1024, 4);
  auto alone = Engine::load(own);
  EXPECT_TRUE(vocabulary_mismatch(engine_->tokenizer(), alone->tokenizer()).empty());
  so.draft = alone.get();
  EXPECT_THROW(Scheduler(*engine_, so, metrics_), InvalidArgument);
}

}  // namespace
}  // namespace tern::sched
