#include "tern/vision/encoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tern/core/task_pool.h"
#include "tern/vision/mmproj_writer.h"

namespace tern::vision {
namespace {

struct TinyFile {
  std::vector<uint8_t> bytes;
  Mmproj open(uint32_t seed = 7, ProjectorType type = ProjectorType::Idefics3,
              bool odd_widths = false) {
    MmprojSpec s = mmproj_preset(type, MmprojShape::Tiny);
    if (odd_widths) {  // rows that are not multiples of 32, as Gemma 3's (4304, 3*14*14)
      s.config.image_size = 28;
      s.config.patch_size = 7;
      s.config.d_ff = 72;
    }
    s.seed = seed;
    bytes = build_mmproj(s).to_bytes();
    return Mmproj::from_memory(bytes, "tiny.gguf");
  }
};

PixelTile random_tile(int size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  PixelTile t{size, std::vector<float>(size_t(size) * size * 3)};
  for (float& v : t.pixels) v = u(rng);
  return t;
}

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

void check_fast_against_reference(ProjectorType type, bool odd_widths = false) {
  TinyFile f;
  const Mmproj ref_file = f.open(7, type, odd_widths);
  TinyFile g;
  const VisionEncoder enc = VisionEncoder::from_mmproj(g.open(7, type, odd_widths));
  TaskPool pool(2);
  for (uint32_t seed : {1u, 2u, 3u}) {
    const PixelTile tile = random_tile(enc.config().image_size, seed);
    const Embeddings want = reference_encode_tile(ref_file, tile);
    const Embeddings got = enc.encode_tile(tile, pool);
    ASSERT_EQ(got.n_tokens, enc.tokens_per_tile());
    ASSERT_EQ(got.n_tokens, want.n_tokens);
    ASSERT_EQ(got.n_embd, 64);
    ASSERT_EQ(got.data.size(), want.data.size());
    std::vector<float> diff(want.data.size());
    for (size_t i = 0; i < diff.size(); ++i) diff[i] = got.data[i] - want.data[i];
    // W8A8 through 2 layers: a few percent of the output's norm, never more.
    EXPECT_LT(norm(diff), 0.05 * norm(want.data)) << "seed " << seed;
  }
}

TEST(VisionEncoder, FastMatchesScalarReferenceOnTinyIdefics3) {
  check_fast_against_reference(ProjectorType::Idefics3);
}

TEST(VisionEncoder, FastMatchesScalarReferenceOnTinyGemma3) {
  check_fast_against_reference(ProjectorType::Gemma3);
}

TEST(VisionEncoder, FastMatchesScalarReferenceOnTinyMlp) {
  check_fast_against_reference(ProjectorType::Mlp);
}

TEST(VisionEncoder, FastMatchesScalarReferenceWithUnalignedWidths) {
  check_fast_against_reference(ProjectorType::Gemma3, true);
  check_fast_against_reference(ProjectorType::Idefics3, true);
  check_fast_against_reference(ProjectorType::Mlp, true);  // 17 positions with the class token
}

TEST(Preprocess, Gemma3PadsToTheSquareKeepingTheAspect) {
  TinyFile f;
  const VisionConfig c = f.open(7, ProjectorType::Gemma3).config();
  Image img{64, 32, std::vector<uint8_t>(64 * 32 * 3, 255)};
  const PreprocessedImage p = preprocess(c, img);
  ASSERT_EQ(p.tiles.size(), 1u);
  EXPECT_EQ(p.grid_x, 0);
  // 32 x 16 of white centred on black: rows 0-7 and 24-31 are padding.
  const PixelTile& t = p.tiles[0];
  EXPECT_FLOAT_EQ(t.pixels[0], -1.0f);
  EXPECT_FLOAT_EQ(t.pixels[(size_t(16) * 32 + 5) * 3], 1.0f);
  EXPECT_FLOAT_EQ(t.pixels[(size_t(30) * 32 + 5) * 3], -1.0f);
  ASSERT_EQ(p.layout.size(), 3u);
  EXPECT_EQ(p.layout[0].text, "<start_of_image>");
  EXPECT_EQ(p.layout[1].tile, 0);
  EXPECT_EQ(p.layout[2].text, "<end_of_image>");
}

TEST(Preprocess, Idefics3SquareImageIsA2x2GridPlusGlobal) {
  TinyFile f;
  const VisionConfig c = f.open().config();
  ASSERT_EQ(c.preproc_image_size, 64);
  Image img{40, 40, std::vector<uint8_t>(40 * 40 * 3, 128)};
  const PreprocessedImage p = preprocess(c, img);
  EXPECT_EQ(p.grid_x, 2);
  EXPECT_EQ(p.grid_y, 2);
  ASSERT_EQ(p.tiles.size(), 5u);
  const float want = (128.0f / 255.0f - 0.5f) / 0.5f;
  for (const PixelTile& t : p.tiles) {
    ASSERT_EQ(t.size, 32);
    for (float v : t.pixels) ASSERT_NEAR(v, want, 1e-6f);  // a flat image stays flat
  }
  std::string text;
  for (const ImagePiece& piece : p.layout)
    text += piece.tile >= 0 ? "<T" + std::to_string(piece.tile) + ">" : piece.text;
  EXPECT_EQ(text,
            "<fake_token_around_image><row_1_col_1><T0><fake_token_around_image><row_1_col_2><T1>\n"
            "<fake_token_around_image><row_2_col_1><T2><fake_token_around_image><row_2_col_2><T3>"
            "\n\n<fake_token_around_image><global-img><T4><fake_token_around_image>");
}

TEST(Preprocess, Idefics3WideImageKeepsAspectInTheGrid) {
  TinyFile f;
  const VisionConfig c = f.open().config();
  Image img{100, 30, std::vector<uint8_t>(100 * 30 * 3)};
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = uint8_t(i * 7);
  const PreprocessedImage p = preprocess(c, img);
  // 64 x int(64 / (100/30)) = 64 x 19 -> 64 x 20 -> 2 x 1 tiles.
  EXPECT_EQ(p.grid_x, 2);
  EXPECT_EQ(p.grid_y, 1);
  EXPECT_EQ(p.tiles.size(), 3u);
}

TEST(Preprocess, LanczosIdentityAndConstant) {
  Image img{7, 5, std::vector<uint8_t>(7 * 5 * 3)};
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = uint8_t(i * 13);
  EXPECT_EQ(resize_lanczos(img, 7, 5).rgb, img.rgb);
  Image flat{9, 4, std::vector<uint8_t>(9 * 4 * 3, 200)};
  for (auto [w, h] : {std::pair{3, 3}, {20, 11}, {9, 1}}) {
    const Image r = resize_lanczos(flat, w, h);
    for (uint8_t v : r.rgb) ASSERT_EQ(v, 200);
  }
  EXPECT_THROW(resize_lanczos(flat, 0, 3), InvalidArgument);
}

}  // namespace
}  // namespace tern::vision
