// Images inside the batched forward pass, on a generated text model and a
// generated idefics3 projector (real encoder, random weights): an image's
// positions take the projector's rows; a prefill chunked anywhere through an
// image (starting, ending or pausing inside it) computes what one chunk
// does; a batch mixing image and text entries gives each what it gets alone;
// and the prefix cache keys an image's positions by its pixel hash, so a
// different image never shares KV while the same one does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "../vision/synthetic_images.h"
#include "tern/core/task_pool.h"
#include "tern/engine/engine.h"
#include "tern/engine/media_prompt.h"
#include "tern/vision/mmproj_writer.h"
#include "tern/vision/pixel_hash.h"
#include "testutil.h"
#include "tiny_model.h"

namespace tern {
namespace {

constexpr int kDModel = 64;  // TinyModelSpec's default width

const std::string& text_model_path() {
  static const std::string p = [] {
    test::TinyModelSpec s;
    s.n_vocab = 131;
    s.tied = false;
    s.seed = 11;
    return test::write_tiny_model(s, "vision_text.gguf");
  }();
  return p;
}

const std::string& mmproj_path(vision::ProjectorType type = vision::ProjectorType::Idefics3) {
  static std::map<int, std::string> paths;
  auto& p = paths[int(type)];
  if (p.empty()) {
    vision::MmprojSpec spec = vision::mmproj_preset(type, vision::MmprojShape::Tiny);
    spec.config.d_out = kDModel;
    p = test::temp_path("vision_" + std::string(vision::projector_name(type)) + ".gguf");
    vision::write_mmproj(spec, p);
  }
  return p;
}

vision::Image image(const std::string& name) {
  oracle_images::Rgb r = oracle_images::make(name);
  return vision::Image{r.width, r.height, std::move(r.rgb)};
}

struct VisionBatchTest : ::testing::Test {
  static void SetUpTestSuite() {
    EngineOptions o;
    o.model_path = text_model_path();
    o.n_threads = 2;
    o.kv_flash_mb = 0;
    o.kv_dram_mb = 64;
    engine = Engine::load(o).release();
    encoder = new vision::VisionEncoder(vision::VisionEncoder::load(mmproj_path()));
  }
  static void TearDownTestSuite() {
    delete encoder;
    delete engine;
  }
  // The image's rows, all tiles (idefics3 tiny: a 2x2 grid + the global image).
  static vision::Embeddings rows(const std::string& name) {
    return encoder->encode(image(name), engine->pool());
  }
  static Engine* engine;
  static vision::VisionEncoder* encoder;
};
Engine* VisionBatchTest::engine = nullptr;
vision::VisionEncoder* VisionBatchTest::encoder = nullptr;

// A prompt: `before` text ids, an image of n rows (placeholder 0), `after` text ids.
std::vector<int32_t> prompt_ids(int before, int n, int after) {
  std::vector<int32_t> ids;
  for (int i = 0; i < before; ++i) ids.push_back(3 + (i * 7) % 100);
  ids.insert(ids.end(), size_t(n), 0);
  for (int i = 0; i < after; ++i) ids.push_back(3 + (i * 13) % 100);
  return ids;
}

// Prefills `ids` (image rows at [pos, pos + rows.n_tokens)) in chunks of the
// given sizes (cycled), returning the last token's logits.
std::vector<float> prefill(Engine& e, SeqId seq, const std::vector<int32_t>& ids, int pos,
                           const vision::Embeddings& rows, std::vector<int> chunks) {
  StepOutput out;
  int at = e.seq_len(seq);
  for (size_t c = 0; at < int(ids.size()); ++c) {
    const int n = std::min(chunks[c % chunks.size()], int(ids.size()) - at);
    std::vector<EmbeddingRun> runs;
    const int a = std::max(at, pos), b = std::min(at + n, pos + rows.n_tokens);
    if (a < b) runs.push_back({a - at, b - a, rows.data.data() + size_t(a - pos) * rows.n_embd});
    Batch batch;
    batch.entries.push_back({seq, std::span<const int32_t>(ids.data() + at, size_t(n)),
                             at + n == int(ids.size()) ? LogitsMode::Last : LogitsMode::None,
                             runs});
    e.step(batch, out);
    at += n;
  }
  const auto last = out.last(0);
  return {last.begin(), last.end()};
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

double max_abs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) m = std::max(m, double(std::fabs(x)));
  return m;
}

TEST_F(VisionBatchTest, ImageRowsReachTheModel) {
  const vision::Embeddings ra = rows("gradient"), rb = rows("noise");
  ASSERT_EQ(ra.n_embd, kDModel);
  ASSERT_EQ(ra.n_tokens, 5 * encoder->tokens_per_tile());
  const auto ids = prompt_ids(5, ra.n_tokens, 4);
  auto run = [&](const vision::Embeddings* r) {
    const SeqId s = engine->new_sequence();
    std::vector<float> l;
    if (r) {
      l = prefill(*engine, s, ids, 5, *r, {int(ids.size())});
    } else {
      StepOutput out;
      Batch b;
      b.entries.push_back({s, std::span<const int32_t>(ids), LogitsMode::Last});
      engine->step(b, out);
      l.assign(out.last(0).begin(), out.last(0).end());
    }
    engine->free_sequence(s);
    return l;
  };
  const auto la = run(&ra), la2 = run(&ra), lb = run(&rb), lt = run(nullptr);
  EXPECT_EQ(la, la2);  // deterministic
  EXPECT_GT(max_abs_diff(la, lb), 1e-3 * max_abs(la)) << "another image, the same logits";
  EXPECT_GT(max_abs_diff(la, lt), 1e-3 * max_abs(la)) << "the rows were not used";
}

// Chunk boundaries anywhere (before, inside, at the end of the image) give
// the one-chunk logits: a position's input and its attention do not depend
// on how the prompt was cut.
TEST_F(VisionBatchTest, ChunkedPrefillThroughAnImageEqualsOneChunk) {
  const vision::Embeddings r = rows("text");
  const int pos = 9;
  const auto ids = prompt_ids(pos, r.n_tokens, 7);
  auto run = [&](std::vector<int> chunks) {
    const SeqId s = engine->new_sequence();
    auto l = prefill(*engine, s, ids, pos, r, std::move(chunks));
    engine->free_sequence(s);
    return l;
  };
  const auto whole = run({int(ids.size())});
  for (const std::vector<int>& chunks : std::vector<std::vector<int>>{
           {1}, {3}, {7, 2}, {pos, 4, 16}, {pos + 5, 100}, {pos + r.n_tokens, 100}, {12}}) {
    const auto l = run(chunks);
    EXPECT_LE(max_abs_diff(l, whole), 1e-4 * max_abs(whole)) << "first chunk " << chunks[0];
    EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(),
              std::max_element(whole.begin(), whole.end()) - whole.begin());
  }
}

// One step holding an image prefill, a text prefill and an image entry that
// starts inside its image gives each entry the logits it gets alone.
TEST_F(VisionBatchTest, MixedBatchEqualsEachAlone) {
  const vision::Embeddings ra = rows("gradient"), rb = rows("noise");
  const auto ia = prompt_ids(4, ra.n_tokens, 6), it = prompt_ids(30, 0, 0),
             ib = prompt_ids(2, rb.n_tokens, 3);
  const auto alone_a = [&] {
    const SeqId s = engine->new_sequence();
    auto l = prefill(*engine, s, ia, 4, ra, {int(ia.size())});
    engine->free_sequence(s);
    return l;
  }();
  const auto alone_t = [&] {
    const SeqId s = engine->new_sequence();
    auto l = prefill(*engine, s, it, 0, vision::Embeddings{}, {int(it.size())});
    engine->free_sequence(s);
    return l;
  }();
  // b: its first 7 positions alone first, so its batched chunk starts inside the image.
  const SeqId sb_alone = engine->new_sequence();
  prefill(*engine, sb_alone, {ib.begin(), ib.begin() + 7}, 2, rb, {7});
  const auto alone_b = prefill(*engine, sb_alone, ib, 2, rb, {int(ib.size())});
  engine->free_sequence(sb_alone);

  const SeqId sa = engine->new_sequence(), st = engine->new_sequence(), sb = engine->new_sequence();
  prefill(*engine, sb, {ib.begin(), ib.begin() + 7}, 2, rb, {7});
  const std::vector<EmbeddingRun> run_a{{4, ra.n_tokens, ra.data.data()}};
  const std::vector<EmbeddingRun> run_b{
      {0, rb.n_tokens - 5, rb.data.data() + size_t(5) * rb.n_embd}};
  Batch batch;
  batch.entries.push_back({sa, std::span<const int32_t>(ia), LogitsMode::Last, run_a});
  batch.entries.push_back({st, std::span<const int32_t>(it), LogitsMode::Last});
  batch.entries.push_back(
      {sb, std::span<const int32_t>(ib.data() + 7, ib.size() - 7), LogitsMode::Last, run_b});
  StepOutput out;
  engine->step(batch, out);
  auto vec = [&](int i) { return std::vector<float>(out.last(i).begin(), out.last(i).end()); };
  EXPECT_LE(max_abs_diff(vec(0), alone_a), 1e-4 * max_abs(alone_a));
  EXPECT_LE(max_abs_diff(vec(1), alone_t), 1e-4 * max_abs(alone_t));
  EXPECT_LE(max_abs_diff(vec(2), alone_b), 1e-4 * max_abs(alone_b));
  for (SeqId s : {sa, st, sb}) engine->free_sequence(s);
}

// A bidirectional run (gemma3's images): its first position sees the run's
// last row; a causal run's does not.
TEST_F(VisionBatchTest, BidirectionalRunsSeeTheWholeImage) {
  const vision::Embeddings r = rows("gradient");
  const int pos = 3;
  const auto ids = prompt_ids(pos, r.n_tokens, 2);
  vision::Embeddings changed = r;
  for (int i = 0; i < r.n_embd; ++i) changed.data[size_t(r.n_tokens - 1) * r.n_embd + i] *= -1.0f;
  auto first_image_logits = [&](const vision::Embeddings& rows, bool bidirectional) {
    const SeqId s = engine->new_sequence();
    const std::vector<EmbeddingRun> runs{{pos, rows.n_tokens, rows.data.data(), bidirectional}};
    Batch b;
    b.entries.push_back({s, std::span<const int32_t>(ids), LogitsMode::All, runs});
    StepOutput out;
    engine->step(b, out);
    const auto row = out.row(out.first_row[0] + pos);
    engine->free_sequence(s);
    return std::vector<float>(row.begin(), row.end());
  };
  const auto causal = first_image_logits(r, false);
  EXPECT_EQ(causal, first_image_logits(changed, false));
  const auto both = first_image_logits(r, true);
  EXPECT_GT(max_abs_diff(both, first_image_logits(changed, true)), 1e-4 * max_abs(both));
  EXPECT_GT(max_abs_diff(both, causal), 1e-4 * max_abs(both));
}

TEST_F(VisionBatchTest, EmbeddingRunsOutsideTheEntryAreRefused) {
  const vision::Embeddings r = rows("gradient");
  const auto ids = prompt_ids(2, 4, 0);
  const SeqId s = engine->new_sequence();
  for (const EmbeddingRun& bad :
       {EmbeddingRun{4, 4, r.data.data()}, EmbeddingRun{-1, 2, r.data.data()},
        EmbeddingRun{0, 0, r.data.data()}, EmbeddingRun{0, 2, nullptr}}) {
    const std::vector<EmbeddingRun> runs{bad};
    Batch b;
    b.entries.push_back({s, std::span<const int32_t>(ids), LogitsMode::Last, runs});
    StepOutput out;
    EXPECT_THROW(engine->step(b, out), InvalidArgument);
    EXPECT_EQ(engine->seq_len(s), 0);
  }
  engine->free_sequence(s);
}

// The prefix cache: a prompt's blocks are keyed by the image hash at the
// image's first position. The same image finds every full block; another
// image (same placeholder ids) only the blocks before it; no key at all the
// same.
TEST_F(VisionBatchTest, PrefixCacheKeysImagesByPixelHash) {
  const vision::Embeddings r = rows("gradient");
  const int pos = 40, block = engine->block_tokens();
  ASSERT_EQ(block, 32);
  const auto ids = prompt_ids(pos, r.n_tokens, 40);  // blocks: text | text+image | ... | tail
  const Sha256Digest ha = vision::pixel_hash(image("gradient"));
  const Sha256Digest hb = vision::pixel_hash(image("noise"));
  auto keys = [&](const Sha256Digest& h) {
    kv::SeqKeys k;
    k.extras.push_back({pos, h});
    return k;
  };
  const SeqId s0 = engine->new_sequence(keys(ha));
  const auto first = prefill(*engine, s0, ids, pos, r, {int(ids.size())});
  engine->free_sequence(s0);  // its full blocks stay cached
  const int full = (int(ids.size()) - 1) / block * block;

  const SeqId same = engine->new_sequence(keys(ha));
  EXPECT_EQ(engine->attach_prefix(same, ids), full);
  // The cached KV continues into the same logits.
  const auto again = prefill(*engine, same, ids, pos, r, {int(ids.size())});
  EXPECT_LE(max_abs_diff(again, first), 1e-4 * max_abs(first));
  engine->free_sequence(same);

  const SeqId other = engine->new_sequence(keys(hb));
  EXPECT_EQ(engine->attach_prefix(other, ids), pos / block * block);
  engine->free_sequence(other);
  const SeqId none = engine->new_sequence();
  EXPECT_EQ(engine->attach_prefix(none, ids), pos / block * block);
  engine->free_sequence(none);
}

// The pair is checked at load: the projector's width must be the text
// model's n_embd, and the wrapping's special tokens must be in the vocabulary
// (the byte-level test vocabulary has none of them).
TEST_F(VisionBatchTest, MismatchedPairsAreClearErrors) {
  try {
    VisionPrompter p(*encoder, engine->tokenizer(), kDModel);
    FAIL() << "a vocabulary without <fake_token_around_image> was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("<fake_token_around_image>"), std::string::npos)
        << e.what();
  }
  try {
    VisionPrompter p(*encoder, engine->tokenizer(), kDModel * 2);
    FAIL() << "a projector of another width was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("128"), std::string::npos) << e.what();
  }
  const auto g3 = vision::VisionEncoder::load(mmproj_path(vision::ProjectorType::Gemma3));
  try {
    VisionPrompter p(g3, engine->tokenizer(), kDModel);
    FAIL() << "a vocabulary without <start_of_image> was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("<start_of_image>"), std::string::npos) << e.what();
  }
}

// mlp (LLaVA-1.5) wraps nothing: the pair needs no special tokens, the rows
// replace the marker, and in a batch beside a text-only sequence each gets
// what it gets alone.
TEST_F(VisionBatchTest, MlpRowsReplaceTheMarkerAndBatchLikeAnyImage) {
  const auto llava = vision::VisionEncoder::load(mmproj_path(vision::ProjectorType::Mlp));
  const VisionPrompter prompter(llava, engine->tokenizer(), kDModel);  // byte vocabulary: fine
  auto source = std::make_shared<vision::EncoderSource>(llava, engine->pool());
  const std::vector<std::shared_ptr<const vision::Image>> images{
      std::make_shared<const vision::Image>(image("noise"))};
  const std::vector<TextSegment> text{{"ab<__media__>cd", true}};
  const MediaPrompt p = prompter.build(text, /*add_bos=*/false, images, source);
  const auto ab = engine->tokenizer().encode("ab", false, true),
             cd = engine->tokenizer().encode("cd", false, true);
  ASSERT_EQ(p.media.size(), 1u);
  EXPECT_EQ(p.media[0].pos, int(ab.size()));
  EXPECT_EQ(p.media[0].n, 16);  // (32 / 8)^2 patches, the class token dropped
  EXPECT_FALSE(p.media[0].bidirectional);
  EXPECT_EQ(p.tokens.size(), ab.size() + 16 + cd.size());

  const vision::Embeddings r = llava.encode(image("noise"), engine->pool());
  const auto ia = prompt_ids(int(ab.size()), r.n_tokens, 5), it = prompt_ids(12, 0, 0);
  auto alone = [&](const std::vector<int32_t>& ids, const vision::Embeddings& rows) {
    const SeqId s = engine->new_sequence();
    auto l = prefill(*engine, s, ids, int(ab.size()), rows, {int(ids.size())});
    engine->free_sequence(s);
    return l;
  };
  const auto alone_a = alone(ia, r), alone_t = alone(it, vision::Embeddings{});
  const SeqId sa = engine->new_sequence(), st = engine->new_sequence();
  const std::vector<EmbeddingRun> run{{int(ab.size()), r.n_tokens, r.data.data()}};
  Batch batch;
  batch.entries.push_back({sa, std::span<const int32_t>(ia), LogitsMode::Last, run});
  batch.entries.push_back({st, std::span<const int32_t>(it), LogitsMode::Last});
  StepOutput out;
  engine->step(batch, out);
  auto vec = [&](int i) { return std::vector<float>(out.last(i).begin(), out.last(i).end()); };
  EXPECT_LE(max_abs_diff(vec(0), alone_a), 1e-4 * max_abs(alone_a));
  EXPECT_LE(max_abs_diff(vec(1), alone_t), 1e-4 * max_abs(alone_t));
  EXPECT_GT(max_abs_diff(alone_a, alone(prompt_ids(int(ab.size()), r.n_tokens, 5),
                                        llava.encode(image("gradient"), engine->pool()))),
            1e-3);  // the rows matter
  for (SeqId s : {sa, st}) engine->free_sequence(s);
}

}  // namespace
}  // namespace tern
