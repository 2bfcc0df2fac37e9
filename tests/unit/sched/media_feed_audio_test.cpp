// The media feed with audio spans: the same one path as pictures. A clip's
// span waits for its encode (a MediaJob advanced in slices between steps),
// a second prompt with the same clip joins it, the rows go to the source's
// store and are found there next time, and the counts land in the clip's
// tally (timings' audio_*), not the pictures'. The source here is a fake
// with a fake job, so no audio encoder is needed.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "../../../src/sched/media_feed.h"
#include "../../../src/sched/sequence.h"
#include "tern/engine/engine.h"
#include "testutil.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

// Three stages; every row holds the clip's first sample.
class FakeJob final : public vision::MediaJob {
 public:
  FakeJob(float v, int rows, int d) : v_(v), rows_(rows), d_(d) {}
  bool advance(TaskPool&, double) override {
    done_ += 1, slices_ += 1;
    return done();
  }
  bool done() const override { return done_ >= 3; }
  vision::Embeddings take() override {
    vision::Embeddings e;
    e.n_tokens = rows_;
    e.n_embd = d_;
    e.data.assign(size_t(rows_) * size_t(d_), v_);
    return e;
  }
  int stages_total() const override { return 3; }
  int stages_done() const override { return done_; }
  int slices() const override { return slices_; }
  double busy_ms() const override { return 0.5 * slices_; }
  double ms_per_gflop() const override { return 0; }
  void set_ms_per_gflop(double) override {}

 private:
  float v_;
  int rows_, d_, done_ = 0, slices_ = 0;
};

class FakeAudioSource final : public vision::EmbeddingSource {
 public:
  FakeAudioSource(int rows, int d) : rows_(rows), d_(d) {}
  std::shared_ptr<const vision::Embeddings> rows_for(const Sha256Digest&,
                                                     const vision::Image&) override {
    throw InvalidArgument("not an image source");
  }
  std::shared_ptr<const vision::Embeddings> cached(const Sha256Digest& hash) override {
    return hash == stored_hash_ ? stored_ : nullptr;
  }
  std::unique_ptr<vision::MediaJob> start_job(const vision::MediaSpan& m) override {
    starts += 1;
    return std::make_unique<FakeJob>(m.audio->samples.at(0), rows_, d_);
  }
  std::shared_ptr<const vision::Embeddings> store(const Sha256Digest& hash,
                                                  vision::Embeddings rows) override {
    stored_hash_ = hash;
    stored_ = std::make_shared<const vision::Embeddings>(std::move(rows));
    return stored_;
  }
  int starts = 0;

 private:
  int rows_, d_;
  Sha256Digest stored_hash_{};
  std::shared_ptr<const vision::Embeddings> stored_;
};

class MediaFeedAudioTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o = testutil::tiny_engine_options(1024, 4);
    o.kv_dram_mb = 16;
    o.kv_flash_mb = 0;
    engine_ = Engine::load(o).release();
  }
  static void TearDownTestSuite() { delete engine_; }

  // `before` text tokens, the clip's 6 rows, three more tokens.
  std::unique_ptr<Sequence> with_clip(float first_sample, int before, uint64_t order) {
    auto clip = std::make_shared<vision::AudioClip>();
    clip->samples.assign(1600, 0.25f);
    clip->samples[0] = first_sample;
    clip->sample_rate = 16000;
    Request r;
    r.prompt.assign(size_t(before), 'x');
    vision::MediaSpan m;
    m.pos = before;
    m.n = 6;
    m.hash = vision::pcm_hash(*clip);
    m.audio = clip;
    m.source = source_;
    r.media.push_back(m);
    r.prompt.insert(r.prompt.end(), 6, 1);
    r.prompt.insert(r.prompt.end(), 3, 'y');
    return std::make_unique<Sequence>(std::move(r), engine_->tokenizer(), engine_->n_vocab(),
                                      order);
  }
  int d() const { return engine_->config().d_model; }

  static inline Engine* engine_ = nullptr;
  std::shared_ptr<FakeAudioSource> source_ =
      std::make_shared<FakeAudioSource>(6, engine_ ? engine_->config().d_model : 0);
  Metrics metrics_;
};

TEST_F(MediaFeedAudioTest, AClipWaitsForItsSlicedEncodeAndCountsAsAudio) {
  MediaFeed feed(d(), nullptr, metrics_);
  auto a = with_clip(0.5f, 4, 0);
  auto b = with_clip(0.5f, 2, 1);  // the same clip
  const int whole = int(a->tokens.size());
  EXPECT_EQ(feed.ready(*a, whole), 4);
  EXPECT_EQ(feed.ready(*b, whole), 2);
  EXPECT_EQ(source_->starts, 1) << "the second prompt joins the first's encode";
  feed.advance(engine_->pool(), 0);  // one stage per call at a zero budget
  EXPECT_TRUE(feed.pending());
  for (int i = 0; i < 10 && feed.pending(); ++i) feed.advance(engine_->pool(), 0);
  EXPECT_FALSE(feed.pending());
  EXPECT_EQ(feed.ready(*a, whole), whole);
  std::vector<EmbeddingRun> runs;
  feed.runs(*a, whole, runs);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].offset, 4);
  EXPECT_EQ(runs[0].n, 6);
  EXPECT_EQ(runs[0].rows[0], 0.5f);
  EXPECT_EQ(a->media.audio.fetched, 1);
  EXPECT_EQ(a->media.audio.cache_hits, 0);
  EXPECT_GT(a->media.audio.fetch_ms, 0);
  EXPECT_EQ(a->media.fetched, 0) << "no pictures";
  EXPECT_EQ(feed.ready(*b, whole), whole);
  EXPECT_EQ(b->media.audio.cache_hits, 1);
  // A later prompt finds the stored rows: no encode.
  auto c = with_clip(0.5f, 1, 2);
  EXPECT_EQ(feed.ready(*c, whole), whole);
  EXPECT_EQ(c->media.audio.cache_hits, 1);
  EXPECT_EQ(source_->starts, 1);
  // Another sound is another encode.
  auto e = with_clip(-0.5f, 1, 3);
  EXPECT_EQ(feed.ready(*e, whole), 1);
  EXPECT_EQ(source_->starts, 2);
}

TEST_F(MediaFeedAudioTest, AnImageSourceRefusesAClip) {
  MediaFeed feed(d(), nullptr, metrics_);
  auto a = with_clip(0.5f, 2, 0);
  // The default media-agnostic calls are the image ones: no job for a clip,
  // and a blocking fetch that says why.
  struct ImageOnly final : vision::EmbeddingSource {
    std::shared_ptr<const vision::Embeddings> rows_for(const Sha256Digest&,
                                                       const vision::Image&) override {
      return nullptr;
    }
  };
  ImageOnly src;
  EXPECT_EQ(src.start_job(a->req.media[0]), nullptr);
  EXPECT_THROW(src.fetch_span(a->req.media[0]), InvalidArgument);
}

}  // namespace
}  // namespace tern::sched
