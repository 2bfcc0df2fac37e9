// tern's idefics3 preprocessing and encoder against llama.cpp's, recorded by
// scripts/oracle/mtmd_embed.cpp on a seeded tiny projector (see
// tests/fixtures/vision/README.md). The projector is regenerated here with
// the same writer and seed, so CI needs no llama.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "synthetic_images.h"
#include "tern/core/task_pool.h"
#include "tern/vision/encoder.h"
#include "tern/vision/mmproj_writer.h"
#include "testutil.h"

namespace tern::vision {
namespace {

struct OracleTile {
  std::vector<uint8_t> pixels;  // (S, S, 3)
  std::vector<float> embd;      // (tokens, n_embd)
};
struct OracleImage {
  std::string name;
  int grid_x = 0, grid_y = 0, tile = 0, tokens = 0, n_embd = 0;
  std::vector<OracleTile> tiles;
};

std::vector<OracleImage> read_oracle(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  auto i32 = [&] {
    int32_t v = 0;
    in.read(reinterpret_cast<char*>(&v), 4);
    return v;
  };
  std::vector<OracleImage> out;
  while (in.peek() != EOF) {
    OracleImage im;
    im.name.resize(size_t(i32()));
    in.read(im.name.data(), std::streamsize(im.name.size()));
    im.grid_x = i32();
    im.grid_y = i32();
    const int n_tiles = i32();
    im.tile = i32();
    im.tokens = i32();
    im.n_embd = i32();
    for (int t = 0; t < n_tiles; ++t) {
      OracleTile ot{std::vector<uint8_t>(size_t(im.tile) * im.tile * 3),
                    std::vector<float>(size_t(im.tokens) * im.n_embd)};
      in.read(reinterpret_cast<char*>(ot.pixels.data()), std::streamsize(ot.pixels.size()));
      in.read(reinterpret_cast<char*>(ot.embd.data()), std::streamsize(ot.embd.size() * 4));
      im.tiles.push_back(std::move(ot));
    }
    if (!in) break;
    out.push_back(std::move(im));
  }
  return out;
}

double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double d = 0, n = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    d += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    n += double(want[i]) * want[i];
  }
  return std::sqrt(d / n);
}

// Checks every recorded image of `fixture` against tern on the tiny `type`
// projector with seed 42 (as `tern gen-mmproj --type T --shape tiny --seed 42`).
void check_against_oracle(ProjectorType type, const std::string& fixture) {
  MmprojSpec spec = mmproj_preset(type, MmprojShape::Tiny);
  spec.seed = 42;
  const std::vector<uint8_t> bytes = build_mmproj(spec).to_bytes();
  const Mmproj ref_file = Mmproj::from_memory(bytes, "tiny-42.gguf");
  const VisionEncoder enc = VisionEncoder::from_mmproj(Mmproj::from_memory(bytes, "tiny-42.gguf"));
  const VisionConfig& c = enc.config();
  TaskPool pool(2);

  const std::vector<OracleImage> oracle = read_oracle(test::fixture_path(fixture));
  ASSERT_EQ(oracle.size(), 3u);
  for (const OracleImage& o : oracle) {
    SCOPED_TRACE(o.name);
    const oracle_images::Rgb src = oracle_images::make(o.name);
    const PreprocessedImage pre = enc.preprocess(Image{src.width, src.height, src.rgb});
    ASSERT_EQ(pre.grid_x, o.grid_x);
    ASSERT_EQ(pre.grid_y, o.grid_y);
    ASSERT_EQ(pre.tiles.size(), o.tiles.size());
    ASSERT_EQ(o.tokens, enc.tokens_per_tile());
    ASSERT_EQ(o.n_embd, c.d_out);
    for (size_t t = 0; t < o.tiles.size(); ++t) {
      SCOPED_TRACE("tile " + std::to_string(t));
      // Preprocessing: the same 8-bit pixels (the issue allows one grey level).
      int worst = 0;
      for (size_t i = 0; i < o.tiles[t].pixels.size(); ++i) {
        const int ch = int(i % 3);
        const float v = pre.tiles[t].pixels[i] * c.image_std[ch] + c.image_mean[ch];
        worst = std::max(worst, std::abs(int(std::lround(v * 255.0f)) - o.tiles[t].pixels[i]));
      }
      EXPECT_LE(worst, 1);
      // Embeddings: the fp32 reference within llama.cpp's own rounding (F16
      // activations into F16 weights), the W8A8 path within its quantization.
      const double ref =
          rel_err(reference_encode_tile(ref_file, pre.tiles[t]).data, o.tiles[t].embd);
      const double fast = rel_err(enc.encode_tile(pre.tiles[t], pool).data, o.tiles[t].embd);
      std::printf(
          "[oracle] %s %s tile %zu: pixels max diff %d, rel. error reference %.2e, fast %.2e\n",
          std::string(projector_name(type)).c_str(), o.name.c_str(), t, worst, ref, fast);
      EXPECT_LT(ref, 5e-3);
      EXPECT_LT(fast, 5e-2);
    }
  }
}

TEST(VisionOracle, Idefics3TinyMatchesLlamaCpp) {
  check_against_oracle(ProjectorType::Idefics3, "vision/idefics3_tiny_seed42.bin");
}

TEST(VisionOracle, Gemma3TinyMatchesLlamaCpp) {
  check_against_oracle(ProjectorType::Gemma3, "vision/gemma3_tiny_seed42.bin");
}

// LLaVA-1.5's layout: CLIP with the class token first (the peer carries the
// fix of llama.cpp #25814), bicubic fit padded with the mean colour.
TEST(VisionOracle, MlpTinyMatchesLlamaCpp) {
  check_against_oracle(ProjectorType::Mlp, "vision/mlp_tiny_seed42.bin");
}

}  // namespace
}  // namespace tern::vision
