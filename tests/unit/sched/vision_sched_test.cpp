// Requests with images through the scheduler, on the generated scheduler
// model and a generated idefics3 projector (the real encoder behind
// vision::EncoderSource): a batch mixing image and text-only requests gives
// each the greedy text it gets alone, with prefill chunks that start, end
// and pause inside images; the same image and prompt again reuses the KV
// through the image; a different image with the same prompt does not; and an
// image whose rows cannot fill its span fails only its own request.
#include <gtest/gtest.h>

#include <memory>
#include <tuple>

#include "../vision/synthetic_images.h"
#include "collector.h"
#include "tern/core/memory_budget.h"
#include "tern/core/task_pool.h"
#include "tern/engine/engine.h"
#include "tern/kv/paged_kv.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/tokenizer.h"
#include "tern/vision/mmproj_writer.h"
#include "tern/vision/pixel_hash.h"
#include "testutil.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

using testutil::Collector;

class VisionSchedTest : public ::testing::Test {
 protected:
  // The scheduler model with dram_mb of KV DRAM and no flash tier.
  static std::unique_ptr<Engine> load_engine(size_t dram_mb) {
    EngineOptions o;
    o.model_path = testutil::tiny_model_path();
    o.n_ctx = 1024;
    o.max_seqs = 8;
    o.kv_dram_mb = dram_mb;
    o.kv_flash_mb = 0;
    return Engine::load(o);
  }

  static void SetUpTestSuite() {
    engine_ = load_engine(256).release();
    vision::MmprojSpec spec =
        vision::mmproj_preset(vision::ProjectorType::Idefics3, vision::MmprojShape::Tiny);
    spec.config.d_out = engine_->config().d_model;
    const std::string path = test::temp_path("sched_idefics3.gguf");
    vision::write_mmproj(spec, path);
    encoder_ = new vision::VisionEncoder(vision::VisionEncoder::load(path));
    source_ = std::make_shared<vision::EncoderSource>(*encoder_, engine_->pool());
  }
  static void TearDownTestSuite() {
    source_.reset();
    delete encoder_;
    delete engine_;
  }

  static SamplingParams greedy(int max_tokens) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
  }

  // text, then the image (all tiles; placeholder id 1) when `image` is set, then more text.
  static Request request(const std::string& id, const std::string& before, const std::string& image,
                         const std::string& after, const Collector& c) {
    Request r;
    r.id = id;
    r.prompt = engine_->tokenizer().encode(before, true, false);
    if (!image.empty()) {
      oracle_images::Rgb rgb = oracle_images::make(image);
      auto img = std::make_shared<const vision::Image>(
          vision::Image{rgb.width, rgb.height, std::move(rgb.rgb)});
      const int per_tile = encoder_->tokens_per_tile();
      const int tiles = int(encoder_->preprocess(*img).tiles.size());
      for (int t = 0; t < tiles; ++t) {  // one span per tile, a text token between them
        vision::MediaSpan m;
        m.pos = int32_t(r.prompt.size());
        m.n = per_tile;
        m.row0 = t * per_tile;
        m.hash = vision::pixel_hash(*img);
        m.image = img;
        m.source = source_;
        r.media.push_back(m);
        r.prompt.insert(r.prompt.end(), size_t(per_tile), 1);
        r.prompt.push_back('|');
      }
    }
    const auto tail = engine_->tokenizer().encode(after, false, false);
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    r.params = greedy(10);
    r.stream = c.stream();
    return r;
  }

  struct Case {
    std::string before, image, after;
  };
  static inline const Case kCases[] = {
      {"Look: ", "gradient", " What is it?"},
      {"A text-only prompt that goes on for a while.", "", ""},
      {"Now ", "noise", " and then?"},
      {"", "text", "Read it."},
  };

  static inline Engine* engine_ = nullptr;
  static inline vision::VisionEncoder* encoder_ = nullptr;
  static inline std::shared_ptr<vision::EmbeddingSource> source_;
  Metrics metrics_;
};

TEST_F(VisionSchedTest, MixedBatchGivesEachItsTextAlone) {
  constexpr int kN = int(std::size(kCases));
  std::vector<std::string> alone(kN);
  {
    Scheduler s(*engine_, SchedulerOptions{1, 64, 512, 0}, metrics_);
    s.start();
    for (int i = 0; i < kN; ++i) {
      Collector c;
      ASSERT_EQ(s.submit(request("alone" + std::to_string(i), kCases[i].before, kCases[i].image,
                                 kCases[i].after, c)),
                SubmitStatus::Accepted);
      const Finish f = c.wait();
      ASSERT_NE(f.reason, FinishReason::Error) << f.error;
      alone[i] = c.text();
      EXPECT_EQ(f.usage.completion_tokens, 10);
    }
  }
  // Another image, another text: the image decides the output.
  EXPECT_NE(alone[0], alone[2]);
  // Batched, 7 tokens a step: chunks begin, end and pause inside the images.
  Scheduler s(*engine_, SchedulerOptions{kN, 64, 7, 0}, metrics_);
  std::vector<std::unique_ptr<Collector>> cs;
  for (int i = 0; i < kN; ++i) {
    cs.push_back(std::make_unique<Collector>());
    ASSERT_EQ(s.submit(request("batch" + std::to_string(i), kCases[i].before, kCases[i].image,
                               kCases[i].after, *cs[i])),
              SubmitStatus::Accepted);
  }
  s.start();
  for (int i = 0; i < kN; ++i) {
    const Finish f = cs[i]->wait();
    EXPECT_NE(f.reason, FinishReason::Error) << f.error;
    EXPECT_EQ(cs[i]->text(), alone[i]) << "case " << i;
  }
}

// Two prompts with the same new picture admitted at the same boundary: the
// second waits on the first's encode (one encode, one shared), and each gets
// the text it gets alone.
TEST_F(VisionSchedTest, TheSamePictureTwiceAtOnceIsEncodedOnce) {
  const Case cases[] = {{"Twice, first: ", "noise", " What is it?"},
                        {"Twice, second: ", "noise", " and say."}};
  std::string alone[2];
  // Alone on an engine of their own: the shared engine's prefix cache must
  // not hold these prompts before the batch runs.
  const std::unique_ptr<Engine> own = load_engine(64);
  for (int i = 0; i < 2; ++i) {
    Metrics m;
    Scheduler s(*own, SchedulerOptions{1, 64, 512, 0}, m);
    s.start();
    Collector c;
    ASSERT_EQ(s.submit(request("alone", cases[i].before, cases[i].image, cases[i].after, c)),
              SubmitStatus::Accepted);
    ASSERT_NE(c.wait().reason, FinishReason::Error);
    alone[i] = c.text();
    EXPECT_EQ(m.vision_encodes.load(), 1u);
  }
  Scheduler s(*engine_, SchedulerOptions{2, 64, 64, 0}, metrics_);
  Collector c0, c1;
  ASSERT_EQ(s.submit(request("a", cases[0].before, cases[0].image, cases[0].after, c0)),
            SubmitStatus::Accepted);
  ASSERT_EQ(s.submit(request("b", cases[1].before, cases[1].image, cases[1].after, c1)),
            SubmitStatus::Accepted);
  s.start();
  const Finish f0 = c0.wait(), f1 = c1.wait();
  ASSERT_NE(f0.reason, FinishReason::Error) << f0.error;
  ASSERT_NE(f1.reason, FinishReason::Error) << f1.error;
  EXPECT_EQ(metrics_.vision_encodes.load(), 1u);
  EXPECT_EQ(metrics_.vision_encodes_shared.load(), 1u);
  EXPECT_GE(metrics_.vision_encode_slices.load(), 1u);
  EXPECT_EQ(f0.timings.image_cache_hits + f1.timings.image_cache_hits, 1);
  EXPECT_EQ(c0.text(), alone[0]);
  EXPECT_EQ(c1.text(), alone[1]);
}

// Bidirectional spans (gemma3's images) are never cut by a chunk: 7-token
// steps give the text of one 512-token prefill.
TEST_F(VisionSchedTest, BidirectionalSpansAreNeverCut) {
  auto both_ways = [&](Request r) {
    for (auto& m : r.media) m.bidirectional = true;
    return r;
  };
  std::string texts[2];
  int i = 0;
  for (int step : {512, 7}) {
    Scheduler s(*engine_, SchedulerOptions{2, 64, step, 0}, metrics_);
    s.start();
    Collector c, other;
    ASSERT_EQ(s.submit(both_ways(request("bi", "Both ways", "text", " then", c))),
              SubmitStatus::Accepted);
    ASSERT_EQ(s.submit(request("t", "some text alongside", "", "", other)), SubmitStatus::Accepted);
    const Finish f = c.wait();
    other.wait();
    EXPECT_NE(f.reason, FinishReason::Error) << f.error;
    texts[i++] = c.text();
  }
  EXPECT_EQ(texts[0], texts[1]);
}

TEST_F(VisionSchedTest, PrefixCacheFollowsTheImage) {
  Scheduler s(*engine_, SchedulerOptions{1, 64, 512, 0}, metrics_);
  s.start();
  const std::string before(40, 'x');  // a first block of text only (BOS + 40 bytes > 32)
  auto run = [&](const std::string& image) {
    Collector c;
    EXPECT_EQ(
        s.submit(request("r", before, image,
                         " tell me more about it, and about everything else in the picture", c)),
        SubmitStatus::Accepted);
    const Finish f = c.wait();
    EXPECT_NE(f.reason, FinishReason::Error) << f.error;
    return std::make_tuple(f.usage.cached_tokens, c.text(), f.usage.prompt_tokens);
  };
  const auto first = run("gradient");
  const auto same = run("gradient");
  const auto other = run("noise");
  const int block = engine_->block_tokens();
  const int n = std::get<2>(first);
  ASSERT_GT(n, 41 + 2 * block);  // the image fills a block of its own
  EXPECT_EQ(std::get<0>(first), 0);
  EXPECT_EQ(std::get<0>(same), (n - 1) / block * block)
      << "the same image and prompt missed the cache";
  EXPECT_EQ(std::get<1>(same), std::get<1>(first));
  EXPECT_EQ(std::get<0>(other), block) << "a different image shared KV past the text before it";
}

// Under KV pressure (1 MiB of DRAM: 13 blocks, no flash tier) four image
// requests of ~5 blocks each preempt one another; a preempted sequence gets
// its image's rows again when its recompute reaches them, and every text
// equals its run on a roomy engine.
TEST_F(VisionSchedTest, PreemptedImageRequestsRecomputeTheirRows) {
  auto run_all = [&](Engine& e, int max_batch, Metrics& m) {
    Scheduler s(e, SchedulerOptions{max_batch, 64, 64, 0}, m);
    std::vector<std::unique_ptr<Collector>> cs;
    std::vector<Request> rs;
    for (int i = 0; i < 4; ++i) {
      cs.push_back(std::make_unique<Collector>());
      Request r = request("p" + std::to_string(i),
                          std::to_string(i) + ": a long preamble that keeps going for a while " +
                              std::string(size_t(40), char('a' + i)),
                          kCases[i % 2 == 0 ? i : 0].image, " and what follows?", *cs.back());
      r.params.max_tokens = 60;
      rs.push_back(std::move(r));
    }
    s.start();
    std::vector<std::string> texts;
    for (size_t i = 0; i < rs.size(); ++i) {
      EXPECT_EQ(s.submit(std::move(rs[i])), SubmitStatus::Accepted);
      if (max_batch > 1) continue;
      const Finish f = cs[i]->wait();  // one at a time
      EXPECT_EQ(f.reason, FinishReason::Length) << f.error;
    }
    for (auto& c : cs) {
      if (max_batch > 1) {
        const Finish f = c->wait();
        EXPECT_EQ(f.reason, FinishReason::Length) << f.error;
      }
      texts.push_back(c->text());
    }
    return texts;
  };
  auto roomy = load_engine(64);
  Metrics m1, m2;
  const auto solo = run_all(*roomy, 1, m1);
  auto tight = load_engine(1);
  ASSERT_EQ(tight->kv().stats().dram_blocks, 13);
  const auto pressed = run_all(*tight, 4, m2);
  EXPECT_EQ(pressed, solo);
  EXPECT_GT(m2.preemptions.load(), 0u);
  tight->kv().check_invariants();
}

TEST_F(VisionSchedTest, RowsThatDoNotFitFailOnlyTheirRequest) {
  Scheduler s(*engine_, SchedulerOptions{4, 64, 16, 0}, metrics_);
  Collector bad, good;
  // (A prompt of its own: a cached prefix would need no rows.)
  Request r = request("bad", "Mismatched rows: ", "gradient", " what?", bad);
  r.media.back().row0 = 1000;  // past the image's rows
  ASSERT_EQ(s.submit(std::move(r)), SubmitStatus::Accepted);
  ASSERT_EQ(s.submit(request("good", "Look: ", "noise", " what?", good)), SubmitStatus::Accepted);
  s.start();
  const Finish fb = bad.wait(), fg = good.wait();
  EXPECT_EQ(fb.reason, FinishReason::Error);
  EXPECT_NE(fb.error.find("embedding rows"), std::string::npos) << fb.error;
  EXPECT_EQ(fg.reason, FinishReason::Length) << fg.error;
}

TEST_F(VisionSchedTest, SpansOutsideThePromptAreRefusedAtSubmit) {
  Scheduler s(*engine_, SchedulerOptions{1, 64, 16, 0}, metrics_);
  Collector c;
  Request r = request("r", "Look: ", "gradient", "", c);
  r.media.back().n = 1000;
  EXPECT_THROW(s.submit(std::move(r)), InvalidArgument);
  Request r2 = request("r2", "Look: ", "gradient", "", c);
  std::swap(r2.media.front(), r2.media.back());  // out of order
  EXPECT_THROW(s.submit(std::move(r2)), InvalidArgument);
}

}  // namespace
}  // namespace tern::sched

namespace tern::sched {
namespace {

// Admission by bytes (core/memory_budget.h): under a budget that holds both
// requests' prompt KV and image rows but one byte less, the second waits in
// the queue until the first's prefill has passed its image (its rows'
// reservation ends), then runs; both give their text alone, and the budget
// is never exceeded. A request bigger than the whole budget is refused at
// submit, and the scheduler goes on serving.
TEST_F(VisionSchedTest, ImageRowsAreAdmittedByBytes) {
  const int B = engine_->block_tokens();
  const size_t bb = size_t(engine_->cache_stats().block_bytes);
  const size_t d = size_t(engine_->config().d_model);
  auto rows_bytes = [&](const Request& r) {
    int64_t n = 0;
    for (const auto& m : r.media) n = std::max<int64_t>(n, m.row0 + m.n);
    return size_t(n) * d * sizeof(float);
  };
  auto kv_bytes = [&](const Request& r) { return (r.prompt.size() + B) / size_t(B) * bb; };
  std::string alone[2];
  const int picks[2] = {0, 2};
  {
    Scheduler s(*engine_, SchedulerOptions{1, 64, 512, 0}, metrics_);
    s.start();
    for (int i = 0; i < 2; ++i) {
      Collector c;
      const Case& k = kCases[picks[i]];
      ASSERT_EQ(s.submit(request("alone", k.before, k.image, k.after, c)), SubmitStatus::Accepted);
      ASSERT_NE(c.wait().reason, FinishReason::Error);
      alone[i] = c.text();
    }
  }
  Collector probe;
  const Request a = request("a", kCases[0].before, kCases[0].image, kCases[0].after, probe);
  const Request b = request("b", kCases[2].before, kCases[2].image, kCases[2].after, probe);
  const size_t total = rows_bytes(a) + rows_bytes(b) + kv_bytes(a) + kv_bytes(b) - 1;
  MemoryBudget budget(total);
  EngineOptions o;
  o.model_path = testutil::tiny_model_path();
  o.n_ctx = 1024;
  o.max_seqs = 8;
  o.kv_dram_mb = 64;
  o.kv_flash_mb = 0;
  o.budget = &budget;
  auto engine = Engine::load(o);
  Metrics m;
  {
    Scheduler s(*engine, SchedulerOptions{4, 64, 512, 0}, m);
    Collector ca, cb, too_big;
    // One byte short even alone: refused at submit.
    MemoryBudget tiny(rows_bytes(a) + kv_bytes(a) - 1);
    o.budget = &tiny;
    {
      auto small = Engine::load(o);
      Metrics ms;
      Scheduler s2(*small, SchedulerOptions{4, 64, 512, 0}, ms);
      EXPECT_THROW(
          s2.submit(request("big", kCases[0].before, kCases[0].image, kCases[0].after, too_big)),
          InsufficientMemoryError);
      EXPECT_EQ(ms.mem_refused, 1u);
    }
    ASSERT_EQ(s.submit(request("a", kCases[0].before, kCases[0].image, kCases[0].after, ca)),
              SubmitStatus::Accepted);
    ASSERT_EQ(s.submit(request("b", kCases[2].before, kCases[2].image, kCases[2].after, cb)),
              SubmitStatus::Accepted);
    s.start();
    const Finish fa = ca.wait(), fb = cb.wait();
    EXPECT_NE(fa.reason, FinishReason::Error) << fa.error;
    EXPECT_NE(fb.reason, FinishReason::Error) << fb.error;
    EXPECT_EQ(ca.text(), alone[0]);
    EXPECT_EQ(cb.text(), alone[1]);
    EXPECT_GE(m.mem_waits, 1u) << "b was admitted beside a";
  }
  const MemoryBudgetStats st = budget.stats();
  EXPECT_LE(st.peak_all, total);
  EXPECT_GE(st.peak[int(MemPool::MmRequests)], rows_bytes(a));
  EXPECT_EQ(st.used[int(MemPool::MmRequests)], 0u);
}

}  // namespace
}  // namespace tern::sched
