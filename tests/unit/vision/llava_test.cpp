// The mlp (LLaVA-1.5) projector: preprocessing (bicubic fit padded with the
// mean colour), which ViT layer the features come from, and the files and
// pairs it refuses. Its agreement with llama.cpp is in oracle_test.cpp
// (VisionOracle.MlpTinyMatchesLlamaCpp); fast vs reference in encoder_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <random>

#include "tern/core/task_pool.h"
#include "tern/vision/encoder.h"
#include "tern/vision/mmproj_writer.h"

namespace tern::vision {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

// A tiny mlp file built in memory, kept alive beside its Mmproj.
struct TinyLlava {
  std::vector<uint8_t> bytes;
  Mmproj load(const std::function<void(MmprojSpec&)>& change = {},
              const std::function<void(gguf::GgufWriter&)>& tweak = {}) {
    MmprojSpec s = mmproj_preset(ProjectorType::Mlp, MmprojShape::Tiny);
    s.seed = 11;
    if (change) change(s);
    gguf::GgufWriter w = build_mmproj(s);
    if (tweak) tweak(w);
    bytes = w.to_bytes();
    return Mmproj::from_memory(bytes, "llava.gguf");
  }
};

std::string load_error(const std::function<void(MmprojSpec&)>& change,
                       const std::function<void(gguf::GgufWriter&)>& tweak = {}) {
  TinyLlava f;
  try {
    f.load(change, tweak);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

PixelTile random_tile(int size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  PixelTile t{size, std::vector<float>(size_t(size) * size * 3)};
  for (float& v : t.pixels) v = u(rng);
  return t;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - b[i]));
  return m;
}

// The pixel at (x, y) of a tile, back in 8-bit values.
std::array<int, 3> pixel(const VisionConfig& c, const PixelTile& t, int x, int y) {
  std::array<int, 3> v{};
  for (int ch = 0; ch < 3; ++ch) {
    const float f = t.pixels[(size_t(y) * t.size + x) * 3 + size_t(ch)];
    v[size_t(ch)] =
        int(std::lround((f * c.image_std[size_t(ch)] + c.image_mean[size_t(ch)]) * 255));
  }
  return v;
}

TEST(LlavaPreprocess, FitsTheImageAndPadsWithTheMeanColour) {
  TinyLlava f;
  const VisionConfig c = f.load().config();
  ASSERT_EQ(c.image_size, 32);
  // 64 x 32 of white -> 32 x 16 centred: rows 0-7 and 24-31 are CLIP's mean,
  // the (122, 116, 104) llama.cpp hard-codes for LLaVA.
  const Image img{64, 32, std::vector<uint8_t>(64 * 32 * 3, 255)};
  const PreprocessedImage p = preprocess(c, img);
  ASSERT_EQ(p.tiles.size(), 1u);
  EXPECT_EQ(p.grid_x, 0);
  const std::array<int, 3> mean{122, 116, 104}, white{255, 255, 255};
  EXPECT_EQ(pixel(c, p.tiles[0], 0, 0), mean);
  EXPECT_EQ(pixel(c, p.tiles[0], 31, 7), mean);
  EXPECT_EQ(pixel(c, p.tiles[0], 5, 8), white);
  EXPECT_EQ(pixel(c, p.tiles[0], 20, 23), white);
  EXPECT_EQ(pixel(c, p.tiles[0], 20, 24), mean);
  // No wrapping text: the layout is the rows alone.
  ASSERT_EQ(p.layout.size(), 1u);
  EXPECT_EQ(p.layout[0].tile, 0);
  EXPECT_TRUE(p.layout[0].text.empty());
}

TEST(LlavaPreprocess, BicubicKeepsAConstantAndOvershootsAnEdge) {
  const Image grey{13, 7, std::vector<uint8_t>(13 * 7 * 3, 77)};
  const Image r = resize_image(grey, 32, 17, ResizeFilter::Bicubic);
  for (uint8_t v : r.rgb) ASSERT_EQ(v, 77);
  // A step from 50 to 200, enlarged: Pillow's cubic (a = -0.5) rings, so some
  // pixels leave [50, 200] -- bilinear never does.
  Image step{8, 1, std::vector<uint8_t>(8 * 3)};
  for (int x = 0; x < 8; ++x)
    for (int ch = 0; ch < 3; ++ch) step.rgb[size_t(x) * 3 + size_t(ch)] = x < 4 ? 50 : 200;
  auto range = [](const Image& im) {
    return std::make_pair(*std::min_element(im.rgb.begin(), im.rgb.end()),
                          *std::max_element(im.rgb.begin(), im.rgb.end()));
  };
  const auto cubic = range(resize_image(step, 32, 1, ResizeFilter::Bicubic));
  const auto linear = range(resize_image(step, 32, 1, ResizeFilter::Bilinear));
  EXPECT_LT(cubic.first, 50);
  EXPECT_GT(cubic.second, 200);
  EXPECT_EQ(linear.first, 50);
  EXPECT_EQ(linear.second, 200);
}

// The feature layer: clip.vision.feature_layer = {l} runs l blocks; without
// the key every stored block runs (the converter already dropped the rest).
TEST(LlavaEncoder, FeatureLayerPicksTheHiddenState) {
  TinyLlava with_key, without_key, penultimate;
  const Mmproj a = with_key.load([](MmprojSpec& s) { s.config.feature_layers = {2}; });
  const Mmproj b = without_key.load();  // the preset, as the legacy converter writes LLaVA-1.5
  ASSERT_TRUE(b.config().feature_layers.empty());
  const Mmproj c = penultimate.load([](MmprojSpec& s) { s.config.feature_layers = {1}; });
  EXPECT_EQ(a.config().n_blocks_run(), 2);
  EXPECT_EQ(b.config().n_blocks_run(), 2);
  EXPECT_EQ(c.config().n_blocks_run(), 1);
  const PixelTile tile = random_tile(32, 3);
  const Embeddings ea = reference_encode_tile(a, tile);
  const Embeddings eb = reference_encode_tile(b, tile);
  const Embeddings ec = reference_encode_tile(c, tile);
  ASSERT_EQ(ea.n_tokens, 16);  // (32 / 8)^2 patches; the class token is dropped
  EXPECT_EQ(ea.data, eb.data);
  EXPECT_GT(max_abs_diff(ea.data, ec.data), 1e-2);
  // The fast path honours it too: closer to its own layer's reference.
  TaskPool pool(2);
  const VisionEncoder fast = VisionEncoder::from_mmproj(
      penultimate.load([](MmprojSpec& s) { s.config.feature_layers = {1}; }));
  const Embeddings fc = fast.encode_tile(tile, pool);
  EXPECT_LT(max_abs_diff(fc.data, ec.data), max_abs_diff(fc.data, ea.data));
}

// The class token is row 0 of the sequence and is dropped after the ViT: the
// output rows are the patches in order, so a patch's content moves its own row most.
TEST(LlavaEncoder, RowsFollowThePatchesAndTheClassTokenIsDropped) {
  TinyLlava f;
  const Mmproj mm = f.load();
  const PixelTile base = random_tile(32, 5);
  const Embeddings e0 = reference_encode_tile(mm, base);
  for (int patch : {0, 5, 15}) {
    PixelTile t = base;
    const int px = patch % 4, py = patch / 4;
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x)
        for (int ch = 0; ch < 3; ++ch)
          t.pixels[(size_t(py * 8 + y) * 32 + size_t(px * 8 + x)) * 3 + size_t(ch)] += 2.0f;
    const Embeddings e1 = reference_encode_tile(mm, t);
    int most = -1;
    double most_d = -1;
    for (int r = 0; r < e0.n_tokens; ++r) {
      double d = 0;
      for (int i = 0; i < e0.n_embd; ++i) {
        const double x = double(e1.data[size_t(r) * e0.n_embd + size_t(i)]) -
                         e0.data[size_t(r) * e0.n_embd + size_t(i)];
        d += x * x;
      }
      if (d > most_d) most_d = d, most = r;
    }
    EXPECT_EQ(most, patch);
  }
}

TEST(LlavaFile, UnsupportedFilesAreRefusedClearly) {
  EXPECT_HAS(load_error({},
                        [](auto& w) {
                          w.set_i32_array("clip.vision.feature_layer", {1, 2});
                        }),
             "feature_layer lists 2 layers: stacking several feature layers (Granite Vision) is "
             "not supported");
  EXPECT_HAS(load_error([](MmprojSpec& s) { s.config.has_post_ln = true; }),
             "an mlp (LLaVA) file with v.post_ln is not supported");
  EXPECT_HAS(load_error({}, [](auto& w) { w.set_i32_array("clip.vision.feature_layer", {3}); }),
             "feature_layer 3 is out of range (block_count 2)");
  EXPECT_HAS(load_error([](MmprojSpec& s) {
               s.edit = [](const std::string& n, std::vector<int64_t>&) {
                 return n != "v.class_embd";
               };
             }),
             "tensor 'v.position_embd.weight' has shape [32, 17], expected [32, 16]");
  EXPECT_HAS(load_error([](MmprojSpec& s) {
               s.edit = [](const std::string& n, std::vector<int64_t>& d) {
                 if (n == "mm.2.weight") d[0] = 48;
                 return true;
               };
             }),
             "tensor 'mm.2.weight' has shape [48, 64], expected [64, 64]");
}

TEST(LlavaFile, TheTextModelMustHaveTheProjectorsWidth) {
  TinyLlava f;
  const Mmproj mm = f.load([](MmprojSpec& s) { s.config.d_out = 576; });
  EXPECT_NO_THROW(check_text_model(mm.config(), 576));
  try {
    check_text_model(mm.config(), 640);
    FAIL() << "accepted a 640-wide text model for a 576-wide projector";
  } catch (const InvalidArgument& e) {
    EXPECT_HAS(std::string(e.what()),
               "outputs 576-wide embeddings but the text model's n_embd is 640");
  }
}

}  // namespace
}  // namespace tern::vision
