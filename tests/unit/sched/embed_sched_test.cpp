// Embedding requests in the scheduler: prefill-only sequences in the same
// steps as generations. Each pooled vector equals the one Engine::step gives
// the prompt alone in one chunk, bit for bit, whatever shared its steps or
// however the step budget cut it; the generations beside them are unchanged;
// an embedding's KV is freed when it finishes and never enters the prefix cache.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "collector.h"
#include "tern/core/error.h"
#include "tern/engine/engine.h"
#include "tern/model/gen_arch.h"
#include "tern/model/pooling.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/tokenizer.h"
#include "testutil.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

using testutil::Collector;

// The reference: the prompt in one step, its hidden rows pooled.
std::vector<float> direct(Engine& e, const std::vector<int32_t>& prompt, Pooling p) {
  const SeqId s = e.new_sequence();
  Batch b;
  b.entries.push_back({s, std::span<const int32_t>(prompt), LogitsMode::Hidden});
  StepOutput out;
  e.step(b, out);
  e.free_sequence(s);
  Pooler pooler(p, e.config().d_model);
  pooler.add(out.hidden_rows(0, int(prompt.size())), int(prompt.size()));
  return pooler.result();
}

std::vector<int32_t> prompt_of(const Engine& e, int i) {
  // Lengths from 1 to ~190 tokens, so some span several KV blocks and steps.
  std::string text(size_t(1 + (i * 37) % 190), 'a');
  for (size_t j = 0; j < text.size(); ++j) text[j] = char('a' + (i * 7 + int(j) * 3) % 26);
  return e.tokenizer().encode(text, false, false);
}

TEST(EmbedSched, BatchedEqualsAloneAndGenerationsUnchanged) {
  auto engine = Engine::load(testutil::tiny_engine_options(1024, 32));
  Engine& e = *engine;
  constexpr int kItems = 12;
  const Pooling kinds[] = {Pooling::Mean, Pooling::Last, Pooling::Cls};
  std::vector<std::vector<float>> want;
  for (int i = 0; i < kItems; ++i) want.push_back(direct(e, prompt_of(e, i), kinds[i % 3]));
  const std::vector<int32_t> gen_prompt = e.tokenizer().encode("Once upon a time", true, false);
  const std::vector<int32_t> gen_want = testutil::greedy_tokens(e, gen_prompt, 16);

  Metrics metrics;
  SchedulerOptions so;
  so.max_batch = 8;     // fewer slots than items: they queue and join steps as others finish
  so.step_tokens = 64;  // long prompts are cut into chunks, differently than alone
  Scheduler sched(e, so, metrics);
  sched.start();
  Collector gen;
  {
    Request r;
    r.id = "gen";
    r.prompt = gen_prompt;
    r.params.temperature = 0;
    r.params.max_tokens = 16;
    r.params.ignore_eos = true;
    r.stream = gen.stream();
    ASSERT_EQ(sched.submit(std::move(r)), SubmitStatus::Accepted);
  }
  std::vector<std::unique_ptr<Collector>> got;
  for (int i = 0; i < kItems; ++i) {
    got.push_back(std::make_unique<Collector>());
    Request r;
    r.id = "emb-" + std::to_string(i);
    r.prompt = prompt_of(e, i);
    r.pooling = kinds[i % 3];
    r.stream = got.back()->stream();
    ASSERT_EQ(sched.submit(std::move(r)), SubmitStatus::Accepted);
  }
  for (int i = 0; i < kItems; ++i) {
    const Finish f = got[size_t(i)]->wait();
    ASSERT_EQ(f.reason, FinishReason::Stop) << f.error;
    EXPECT_EQ(f.usage.prompt_tokens, int(prompt_of(e, i).size()));
    EXPECT_EQ(f.usage.completion_tokens, 0);
    EXPECT_EQ(got[size_t(i)]->tokens(), 0);
    EXPECT_EQ(f.embedding, want[size_t(i)]) << "item " << i;  // bit-identical
  }
  const Finish gf = gen.wait();
  EXPECT_EQ(gf.reason, FinishReason::Length);
  EXPECT_EQ(gf.usage.completion_tokens, 16);
  std::string text;
  for (int32_t t : gen_want) text += e.tokenizer().token_to_piece(t, false);
  EXPECT_EQ(gen.text(), text);
  sched.stop();
  EXPECT_GT(metrics.steps.load(), 0u);
}

// Client a's two generations and, newest, its long embedding hold every
// batch slot; a step prefills two of the embedding's tokens beside the two
// decodes. Client b's request arrives mid-prefill, and the newest of a's
// sequences, the embedding, yields its slot (preempted: its KV released) and
// is recomputed later. Its vector is still exactly the one it has alone:
// the pooled rows restart with the KV.
TEST(EmbedSched, APreemptedEmbeddingRecomputesTheSameVector) {
  auto engine = Engine::load(testutil::tiny_engine_options(1024, 8));
  Engine& e = *engine;
  int item = 0;
  while (prompt_of(e, item).size() < 150) ++item;
  const std::vector<int32_t> prompt = prompt_of(e, item);
  const std::vector<float> want = direct(e, prompt, Pooling::Mean);
  Metrics metrics;
  SchedulerOptions so;
  so.max_batch = 3;
  so.step_tokens = 4;  // two decodes and two of the embedding's tokens a step
  so.itl_slack = 0;
  Scheduler sched(e, so, metrics);
  sched.start();
  auto submit = [&](const std::string& client, std::vector<int32_t> p, Pooling pooling,
                    Collector& c) {
    Request r;
    r.id = client + std::to_string(p.size());
    r.client = client;
    r.prompt = std::move(p);
    r.pooling = pooling;
    r.params.max_tokens = pooling == Pooling::None ? 300 : 0;
    r.params.ignore_eos = true;
    r.stream = c.stream();
    ASSERT_EQ(sched.submit(std::move(r)), SubmitStatus::Accepted);
  };
  Collector g1, g2, emb, other;
  submit("a", {5, 6, 7}, Pooling::None, g1);
  submit("a", {8, 9}, Pooling::None, g2);
  while (metrics.running.load() < 2) std::this_thread::sleep_for(std::chrono::microseconds(100));
  submit("a", prompt, Pooling::Mean, emb);
  // Wait until the embedding is well into its prefill (the generations' 5
  // prompt tokens, then its own).
  while (metrics.prompt_tokens.load() < 5 + 40)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  submit("b", {10, 11}, Pooling::None, other);
  const Finish f = emb.wait();
  ASSERT_EQ(f.reason, FinishReason::Stop) << f.error;
  EXPECT_EQ(f.embedding, want);
  EXPECT_GE(f.timings.preemptions, 1) << "the embedding was not preempted: the test missed";
  sched.cancel_all();
  sched.stop();
}

TEST(EmbedSched, KvIsFreedAndNeverCached) {
  auto engine = Engine::load(testutil::tiny_engine_options(1024, 8));
  Engine& e = *engine;
  Metrics metrics;
  Scheduler sched(e, SchedulerOptions{}, metrics);
  sched.start();
  const std::vector<int32_t> prompt = prompt_of(e, 5);  // several full blocks
  ASSERT_GT(int(prompt.size()), 2 * e.block_tokens());
  std::vector<float> first;
  for (int round = 0; round < 2; ++round) {
    Collector c;
    Request r;
    r.id = "emb";
    r.prompt = prompt;
    r.pooling = Pooling::Mean;
    r.stream = c.stream();
    ASSERT_EQ(sched.submit(std::move(r)), SubmitStatus::Accepted);
    const Finish f = c.wait();
    ASSERT_EQ(f.reason, FinishReason::Stop) << f.error;
    EXPECT_EQ(f.usage.cached_tokens, 0);  // the second round reuses nothing
    if (round == 0)
      first = f.embedding;
    else
      EXPECT_EQ(f.embedding, first);
  }
  sched.stop();
  const kv::KvStats st = e.cache_stats();
  EXPECT_EQ(st.dram_cached, 0) << "an embedding's blocks entered the prefix cache";
  EXPECT_EQ(st.dram_used, 0) << "an embedding's blocks outlived it";
  EXPECT_EQ(e.free_sequences(), 8);
}

TEST(EmbedSched, RefusesImages) {
  auto engine = Engine::load(testutil::tiny_engine_options(256, 4));
  Metrics metrics;
  Scheduler sched(*engine, SchedulerOptions{}, metrics);
  Collector c;
  Request r;
  r.id = "emb";
  r.prompt = {5, 6, 7};
  r.pooling = Pooling::Last;
  r.media.push_back({});
  r.stream = c.stream();
  try {
    sched.submit(std::move(r));
    ADD_FAILURE() << "an embedding with an image was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("an embedding takes no images"), std::string::npos);
  }
}

// An encoder (the generated bert) attends both ways, so each of its
// sequences runs whole in one step even when longer than the step budget:
// its vector equals the one-step reference bit for bit however many share
// the steps (a chunked one would differ). A generation is refused at submit.
std::unique_ptr<Engine> load_bert() {
  const std::string path = test::temp_path("sched-bert.gguf");
  generate_arch_model("bert", 3, nullptr).writer.write(path);
  EngineOptions o;
  o.model_path = path;
  o.n_ctx = 128;
  o.max_seqs = 8;
  o.kv_flash_mb = 0;
  return Engine::load(o);
}

TEST(EncoderSched, WholeSequencesPastTheStepBudget) {
  auto engine = load_bert();
  Engine& e = *engine;
  std::vector<std::vector<int32_t>> prompts;
  std::string text = "the quick brown fox";
  for (int i = 0; i < 6; ++i, text += " jumps over the lazy dog, and the cat sat on the mat.")
    prompts.push_back(e.tokenizer().encode(text, true, true));
  ASSERT_GT(prompts.back().size(), 40u);
  std::vector<std::vector<float>> want;  // before the scheduler owns the engine
  for (size_t i = 0; i < prompts.size(); ++i)
    want.push_back(direct(e, prompts[i], i % 2 ? Pooling::Mean : Pooling::Cls));
  Metrics metrics;
  SchedulerOptions so;
  so.max_batch = 4;
  so.step_tokens = 16;  // shorter than most of the prompts
  Scheduler sched(e, so, metrics);
  sched.start();
  std::vector<std::unique_ptr<Collector>> got;
  for (size_t i = 0; i < prompts.size(); ++i) {
    got.push_back(std::make_unique<Collector>());
    Request r;
    r.id = "emb-" + std::to_string(i);
    r.prompt = prompts[i];
    r.pooling = i % 2 ? Pooling::Mean : Pooling::Cls;
    r.stream = got.back()->stream();
    ASSERT_EQ(sched.submit(std::move(r)), SubmitStatus::Accepted);
  }
  Request g;
  g.id = "gen";
  g.prompt = prompts[0];
  g.params.max_tokens = 4;
  Collector gen;
  g.stream = gen.stream();
  EXPECT_THROW(sched.submit(std::move(g)), InvalidArgument);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Finish f = got[i]->wait();
    ASSERT_EQ(f.reason, FinishReason::Stop) << f.error;
    EXPECT_EQ(f.embedding, want[i]) << "item " << i;
  }
  sched.stop();
}

// Rank pooling needs the model's classification head; the tiny model has none.
TEST(EmbedSched, RankNeedsAHead) {
  auto engine = Engine::load(testutil::tiny_engine_options(256, 4));
  ASSERT_EQ(engine->rank_head(), nullptr);
  Metrics metrics;
  Scheduler sched(*engine, SchedulerOptions{}, metrics);
  Collector c;
  Request r;
  r.id = "rank";
  r.prompt = {5, 6, 7};
  r.pooling = Pooling::Rank;
  r.stream = c.stream();
  EXPECT_THROW(sched.submit(std::move(r)), InvalidArgument);
}

}  // namespace
}  // namespace tern::sched
