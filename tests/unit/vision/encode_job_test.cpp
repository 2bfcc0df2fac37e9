// The resumable encode (EncodeJob) against the one-shot encode: run one
// stage a call, in row blocks that do not divide the patch rows, it gives the
// same rows bit for bit, for every projector type the encoder runs, over all
// tiles of an image; its bookkeeping (stages, slices, busy time) adds up;
// and the budget bounds a slice.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>

#include "synthetic_images.h"
#include "tern/core/error.h"
#include "tern/core/task_pool.h"
#include "tern/vision/encoder.h"
#include "tern/vision/mmproj_writer.h"

namespace tern::vision {
namespace {

constexpr double kNoLimit = std::numeric_limits<double>::infinity();

struct File {
  std::vector<uint8_t> bytes;
  VisionEncoder load(ProjectorType type, int image_size) {
    MmprojSpec s = mmproj_preset(type, MmprojShape::Tiny);
    s.config.image_size = image_size;  // (image_size / 8)^2 patch rows
    if (type == ProjectorType::Idefics3) s.config.preproc_image_size = 2 * image_size;
    s.seed = 11;
    bytes = build_mmproj(s).to_bytes();
    return VisionEncoder::from_mmproj(Mmproj::from_memory(bytes, "tiny.gguf"));
  }
};

std::shared_ptr<const Image> image(const std::string& name) {
  oracle_images::Rgb rgb = oracle_images::make(name);
  return std::make_shared<const Image>(Image{rgb.width, rgb.height, std::move(rgb.rgb)});
}

void expect_same_rows(const Embeddings& got, const Embeddings& want) {
  ASSERT_EQ(got.n_tokens, want.n_tokens);
  ASSERT_EQ(got.n_embd, want.n_embd);
  ASSERT_EQ(got.data.size(), want.data.size());
  EXPECT_EQ(0, std::memcmp(got.data.data(), want.data.data(), got.data.size() * sizeof(float)))
      << "the sliced encode differs from the one-shot encode";
}

class EncodeJobTest : public ::testing::TestWithParam<ProjectorType> {};

TEST_P(EncodeJobTest, OneStageACallEqualsTheOneShotEncode) {
  File f;
  const VisionEncoder enc = f.load(GetParam(), 48);  // 36 patch rows, 2 layers, 4 heads
  TaskPool pool(2);
  for (const char* name : {"gradient", "noise", "text"}) {
    const auto img = image(name);
    const Embeddings want = enc.encode(*img, pool);
    const int tiles = int(enc.preprocess(*img).tiles.size());
    for (int rb : {1, 5, 7, 36, 1000}) {
      SCOPED_TRACE(std::string(name) + " row_block " + std::to_string(rb));
      EncodeJob job = enc.start_encode(img, rb);
      EXPECT_FALSE(job.done());
      int calls = 0;
      while (!job.advance(pool, 0.0)) ++calls;  // a zero budget: one step a call
      ++calls;
      const int blocks = (36 + std::min(rb, 36) - 1) / std::min(rb, 36);
      const int per_tile = blocks + 2 * (2 * blocks + 4) + 1;
      EXPECT_EQ(job.stages_total(), tiles * per_tile);
      EXPECT_EQ(job.stages_done(), job.stages_total());
      EXPECT_EQ(calls, 1 + job.stages_total());  // preprocessing, then each stage
      EXPECT_EQ(job.slices(), calls);
      EXPECT_GT(job.busy_ms(), 0.0);
      expect_same_rows(job.take(), want);
    }
  }
}

TEST_P(EncodeJobTest, OneTileJobEqualsEncodeTile) {
  File f;
  const VisionEncoder enc = f.load(GetParam(), 32);
  TaskPool pool(1);
  const auto img = image("noise");
  const PreprocessedImage pre = enc.preprocess(*img);
  for (const PixelTile& t : pre.tiles) {
    const Embeddings want = enc.encode_tile(t, pool);
    EncodeJob job = enc.start_encode_tile(t, 3);
    int calls = 0;
    while (!job.advance(pool, 0.0)) ++calls;
    EXPECT_EQ(calls + 1, job.stages_total());  // no preprocessing step
    expect_same_rows(job.take(), want);
  }
}

INSTANTIATE_TEST_SUITE_P(Projectors, EncodeJobTest,
                         ::testing::Values(ProjectorType::Idefics3, ProjectorType::Gemma3));

TEST(EncodeJob, AnUnlimitedBudgetFinishesInOneSlice) {
  File f;
  const VisionEncoder enc = f.load(ProjectorType::Idefics3, 32);
  TaskPool pool(2);
  const auto img = image("gradient");
  EncodeJob job = enc.start_encode(img);
  EXPECT_TRUE(job.advance(pool, kNoLimit));
  EXPECT_EQ(job.slices(), 1);
  EXPECT_GT(job.ms_per_gflop(), 0.0);
  expect_same_rows(job.take(), enc.encode(*img, pool));
  EXPECT_THROW(job.take(), InvalidArgument);  // once
}

TEST(EncodeJob, ABudgetBelowTheNextStageStopsTheSlice) {
  File f;
  const VisionEncoder enc = f.load(ProjectorType::Gemma3, 32);
  TaskPool pool(1);
  EncodeJob job = enc.start_encode(image("text"));
  EXPECT_THROW(job.take(), InvalidArgument);  // not done
  // A predicted cost far above any budget: each call runs exactly one stage.
  job.set_ms_per_gflop(1e12);
  job.advance(pool, 1e6);  // preprocessing is a step of its own
  EXPECT_EQ(job.stages_done(), 0);
  for (int i = 1; i <= 3; ++i) {
    job.set_ms_per_gflop(1e12);
    job.advance(pool, 1e6);  // at least one stage a call, and only one here
    EXPECT_EQ(job.stages_done(), i);
  }
  EXPECT_EQ(job.slices(), 4);
}

TEST(EncodeJob, RefusesATileOfTheWrongSize) {
  File f;
  const VisionEncoder enc = f.load(ProjectorType::Idefics3, 32);
  EXPECT_THROW(enc.start_encode_tile(PixelTile{16, std::vector<float>(16 * 16 * 3)}),
               InvalidArgument);
  EXPECT_THROW(enc.start_encode(nullptr), InvalidArgument);
}

}  // namespace
}  // namespace tern::vision
