// The media feed on its own, without a scheduler thread: a prompt waits
// before a picture until its encode (advanced in slices) ends, a second
// prompt with the same picture joins that encode, an encode nobody waits for
// is dropped, rows of a blocking source are fetched once per picture and
// checked against the span, chunks never end inside a bidirectional span,
// and the reservation in the memory budget lasts until the prefill is past
// the last span. Sequences come from the generated scheduler model (for
// their tokenizer), encodes from a generated idefics3 projector.
#include "../../../src/sched/media_feed.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>

#include "../../../src/sched/sequence.h"
#include "../vision/synthetic_images.h"
#include "tern/core/memory_budget.h"
#include "tern/engine/engine.h"
#include "tern/vision/encoder.h"
#include "tern/vision/mmproj_writer.h"
#include "tern/vision/pixel_hash.h"
#include "testutil.h"
#include "tiny_engine.h"

namespace tern::sched {
namespace {

// Rows without an encoder (it cannot encode in slices, so it is fetched
// from, blocking): n_rows rows of width d, each picture's filled with the
// first byte of its hash.
class FixedSource final : public vision::EmbeddingSource {
 public:
  FixedSource(int n_rows, int d) : n_rows_(n_rows), d_(d) {}
  std::shared_ptr<const vision::Embeddings> rows_for(const Sha256Digest& hash,
                                                     const vision::Image&) override {
    calls += 1;
    auto e = std::make_shared<vision::Embeddings>();
    e->n_tokens = n_rows_;
    e->n_embd = d_;
    e->data.assign(size_t(n_rows_) * size_t(d_), float(hash[0]));
    return e;
  }
  int calls = 0;

 private:
  int n_rows_, d_;
};

class MediaFeedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o = testutil::tiny_engine_options(1024, 4);
    o.kv_dram_mb = 16;
    o.kv_flash_mb = 0;
    engine_ = Engine::load(o).release();
    vision::MmprojSpec spec =
        vision::mmproj_preset(vision::ProjectorType::Idefics3, vision::MmprojShape::Tiny);
    spec.config.d_out = engine_->config().d_model;
    const std::string path = test::temp_path("media_feed_idefics3.gguf");
    vision::write_mmproj(spec, path);
    encoder_ = new vision::VisionEncoder(vision::VisionEncoder::load(path));
    encoder_source_ = std::make_shared<vision::EncoderSource>(*encoder_, engine_->pool());
  }
  static void TearDownTestSuite() {
    encoder_source_.reset();
    delete encoder_;
    delete engine_;
  }

  static int d_model() { return engine_->config().d_model; }
  static std::shared_ptr<const vision::Image> picture(const std::string& name) {
    oracle_images::Rgb rgb = oracle_images::make(name);
    return std::make_shared<const vision::Image>(
        vision::Image{rgb.width, rgb.height, std::move(rgb.rgb)});
  }
  static vision::MediaSpan span(std::shared_ptr<const vision::Image> img, int pos, int n, int row0,
                                std::shared_ptr<vision::EmbeddingSource> source) {
    vision::MediaSpan m;
    m.pos = pos;
    m.n = n;
    m.row0 = row0;
    m.hash = vision::pixel_hash(*img);
    m.image = std::move(img);
    m.source = std::move(source);
    return m;
  }
  // `before` text tokens, then every tile of the picture (a '|' after each,
  // as the server lays them out), then three more tokens.
  static std::unique_ptr<Sequence> with_picture(const std::string& name, int before,
                                                uint64_t order) {
    Request r;
    r.prompt.assign(size_t(before), 'x');
    const auto img = picture(name);
    const int per_tile = encoder_->tokens_per_tile();
    const int tiles = int(encoder_->preprocess(*img).tiles.size());
    for (int t = 0; t < tiles; ++t) {
      r.media.push_back(span(img, int(r.prompt.size()), per_tile, t * per_tile, encoder_source_));
      r.prompt.insert(r.prompt.end(), size_t(per_tile), 1);
      r.prompt.push_back('|');
    }
    r.prompt.insert(r.prompt.end(), 3, 'y');
    return sequence(std::move(r), order);
  }
  static std::unique_ptr<Sequence> sequence(Request r, uint64_t order) {
    if (r.prompt.empty()) r.prompt.assign(32, 'x');
    return std::make_unique<Sequence>(std::move(r), engine_->tokenizer(), engine_->n_vocab(),
                                      order);
  }
  // Advances the feed's encodes until none is left.
  static void finish_encodes(MediaFeed& feed) {
    for (int i = 0; i < 1000 && feed.pending(); ++i) feed.advance(engine_->pool(), 1e9);
    ASSERT_FALSE(feed.pending());
  }

  static inline Engine* engine_ = nullptr;
  static inline vision::VisionEncoder* encoder_ = nullptr;
  static inline std::shared_ptr<vision::EmbeddingSource> encoder_source_;
  Metrics metrics_;
};

TEST_F(MediaFeedTest, APromptWaitsBeforeItsPictureUntilTheEncodeEnds) {
  MediaFeed feed(d_model(), nullptr, metrics_);
  auto a = with_picture("noise", 5, 0);
  auto b = with_picture("noise", 2, 1);
  const int whole = int(a->tokens.size());
  // Text before the picture runs; the picture's encode starts once.
  EXPECT_EQ(feed.ready(*a, 4), 4);
  EXPECT_EQ(metrics_.vision_encodes.load(), 0u);
  EXPECT_EQ(feed.ready(*a, whole), 5);
  EXPECT_EQ(feed.ready(*b, whole), 2);
  EXPECT_EQ(metrics_.vision_encodes.load(), 1u);
  EXPECT_EQ(metrics_.vision_encodes_shared.load(), 1u);
  EXPECT_TRUE(feed.pending());
  EXPECT_EQ(feed.ready(*a, whole), 5);  // still encoding
  finish_encodes(feed);
  EXPECT_GE(metrics_.vision_encode_slices.load(), 1u);
  EXPECT_EQ(feed.ready(*a, whole), whole);
  EXPECT_EQ(feed.ready(*b, int(b->tokens.size())), int(b->tokens.size()));
  ASSERT_TRUE(a->media.rows[0]);
  EXPECT_EQ(a->media.rows[0], b->media.rows[0]) << "one encode, one set of rows";
  EXPECT_EQ(a->media.fetched + b->media.fetched, 2);
  EXPECT_EQ(b->media.cache_hits, 1);
  EXPECT_GT(a->media.fetch_ms, 0) << "the encode's time goes to the prompt that started it";
  EXPECT_EQ(b->media.fetch_ms, 0);
  // The rows the step feeds are the encoder's, at each span's own rows.
  const vision::Embeddings direct = encoder_->encode(*a->req.media[0].image, engine_->pool());
  EXPECT_EQ(a->media.rows[0]->data, direct.data);
  std::vector<EmbeddingRun> runs;
  feed.runs(*a, whole, runs);
  ASSERT_EQ(runs.size(), a->req.media.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const vision::MediaSpan& m = a->req.media[i];
    EXPECT_EQ(runs[i].offset, m.pos);
    EXPECT_EQ(runs[i].n, m.n);
    EXPECT_EQ(runs[i].rows, a->media.rows[0]->data.data() + size_t(m.row0) * size_t(d_model()));
  }
}

TEST_F(MediaFeedTest, AnEncodeNobodyWaitsForIsDropped) {
  MediaFeed feed(d_model(), nullptr, metrics_);
  auto a = with_picture("gradient", 3, 0);
  auto b = with_picture("gradient", 3, 1);
  EXPECT_EQ(feed.ready(*a, 100), 3);
  EXPECT_EQ(feed.ready(*b, 100), 3);
  a.reset();  // one of two waiters goes: the encode goes on
  feed.advance(engine_->pool(), 0);
  EXPECT_EQ(metrics_.vision_encodes_dropped.load(), 0u);
  EXPECT_TRUE(feed.pending());
  b.reset();  // the last one goes: the encode ends
  feed.advance(engine_->pool(), 0);
  EXPECT_EQ(metrics_.vision_encodes_dropped.load(), 1u);
  EXPECT_FALSE(feed.pending());
}

TEST_F(MediaFeedTest, ABlockingSourceIsFetchedOncePerPicture) {
  const int d = d_model();
  auto source = std::make_shared<FixedSource>(8, d);
  MediaFeed feed(d, nullptr, metrics_);
  const auto img = picture("noise");
  Request r;
  r.prompt.assign(20, 'x');
  r.media = {span(img, 3, 4, 0, source), span(img, 8, 4, 4, source)};
  auto s = sequence(std::move(r), 0);
  EXPECT_EQ(feed.ready(*s, 20), 20);  // nothing to wait for: fetched when fed
  EXPECT_EQ(source->calls, 0);
  EXPECT_FALSE(feed.pending());
  std::vector<EmbeddingRun> runs;
  s->in_kv = 2;
  feed.runs(*s, 8, runs);  // positions 2..9: all of the first span, the second's first two
  ASSERT_EQ(runs.size(), 2u);
  const float* rows = s->media.rows[0]->data.data();
  EXPECT_EQ(runs[0].offset, 1);
  EXPECT_EQ(runs[0].n, 4);
  EXPECT_EQ(runs[0].rows, rows);
  EXPECT_EQ(runs[1].offset, 6);
  EXPECT_EQ(runs[1].n, 2);
  EXPECT_EQ(runs[1].rows, rows + 4 * size_t(d));
  EXPECT_EQ(source->calls, 1);
  EXPECT_EQ(s->media.fetched, 1);
  EXPECT_EQ(s->media.cache_hits, 0);
  // Past the first span only: both spans share the rows, so they stay.
  s->in_kv = 10;
  MediaFeed::release_passed(*s);
  EXPECT_TRUE(s->media.rows[0] || s->media.rows[1]);
  s->in_kv = 12;
  MediaFeed::release_passed(*s);
  EXPECT_FALSE(s->media.rows[0] || s->media.rows[1]);
}

TEST_F(MediaFeedTest, RowsThatDoNotFitTheSpanOrTheModelThrow) {
  const auto img = picture("text");
  for (auto [n_rows, width, what] :
       {std::tuple{2, d_model(), "embedding rows"}, std::tuple{8, d_model() + 1, "wide"}}) {
    MediaFeed feed(d_model(), nullptr, metrics_);
    Request r;
    r.prompt.assign(10, 'x');
    r.media = {span(img, 2, 4, 0, std::make_shared<FixedSource>(n_rows, width))};
    auto s = sequence(std::move(r), 0);
    std::vector<EmbeddingRun> runs;
    try {
      feed.runs(*s, 10, runs);
      ADD_FAILURE() << "no error for " << what;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  }
}

TEST_F(MediaFeedTest, AChunkNeverEndsInsideABidirectionalSpan) {
  const auto img = picture("noise");
  Request r;
  r.prompt.assign(30, 'x');
  r.media = {span(img, 10, 8, 0, std::make_shared<FixedSource>(8, d_model()))};
  r.media[0].bidirectional = true;
  auto s = sequence(std::move(r), 0);
  s->in_kv = 5;
  EXPECT_EQ(MediaFeed::fit_chunk(*s, 5), 5);    // ends where the span starts
  EXPECT_EQ(MediaFeed::fit_chunk(*s, 8), 5);    // would end inside: cut before it
  EXPECT_EQ(MediaFeed::fit_chunk(*s, 13), 13);  // ends where it ends
  s->in_kv = 10;
  EXPECT_EQ(MediaFeed::fit_chunk(*s, 2), 8);  // starts in it: runs to its end
  s->req.media[0].bidirectional = false;
  EXPECT_EQ(MediaFeed::fit_chunk(*s, 2), 2);
}

TEST_F(MediaFeedTest, BytesAreReservedUntilThePrefillIsPastTheLastSpan) {
  const int d = d_model();
  auto source = std::make_shared<FixedSource>(8, d);
  const auto x = picture("noise"), y = picture("gradient");
  auto request = [&] {
    Request r;
    r.prompt.assign(40, 'x');
    // Two spans of x (8 rows in all) and three rows of y.
    r.media = {span(x, 2, 4, 0, source), span(x, 8, 4, 4, source), span(y, 20, 3, 0, source)};
    return r;
  };
  const size_t bytes = size_t(8 + 3) * size_t(d) * sizeof(float);
  MemoryBudget budget(bytes);
  MediaFeed feed(d, &budget, metrics_);
  Request a = request(), b = request();
  EXPECT_EQ(feed.bytes(a), bytes);
  ASSERT_TRUE(feed.reserve(a, false));
  EXPECT_EQ(budget.used(MemPool::MmRequests), bytes);
  EXPECT_FALSE(feed.reserve(b, false)) << "no room while another runs";
  EXPECT_FALSE(b.media_charge);
  ASSERT_TRUE(feed.reserve(b, true)) << "alone, it runs past the budget";
  EXPECT_EQ(budget.used(MemPool::MmRequests), 2 * bytes);
  b.media_charge.reset();
  auto s = sequence(std::move(a), 0);
  s->in_kv = 22;
  MediaFeed::release_passed(*s);
  EXPECT_EQ(budget.used(MemPool::MmRequests), bytes) << "kept while inside the last span";
  s->in_kv = 23;
  MediaFeed::release_passed(*s);
  EXPECT_EQ(budget.used(MemPool::MmRequests), 0u);
}

}  // namespace
}  // namespace tern::sched
