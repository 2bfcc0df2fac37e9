// The vision oracle: llama.cpp's own preprocessing (mtmd's idefics3 tiling,
// gemma3's and mlp's fixed-size resize) and CLIP encoder run on a projector file, for tern's tests
// to compare with. Built by scripts/oracle/build_mtmd_embed.sh against the peer's libmtmd; not part
// of tern's build.
//
// For timing only: TERN_ORACLE_MAX_TILES=n encodes the first n tiles of
// each image (the output file is then incomplete).
//
//   mtmd_embed MMPROJ OUT.bin THREADS [IMAGE...]   (names from synthetic_images.h,
//                                                   or WxH for a gradient of that size)
//
// OUT.bin, little-endian: per image: i32 name_len, name bytes, i32 grid_x,
// grid_y, n_tiles, tile_size, tokens_per_tile, n_embd; then per tile (grid
// row by row, the overview last, as mtmd orders them in the prompt): u8
// pixels (tile, tile, 3) recovered from the normalized floats, then f32
// embeddings (tokens, n_embd). Timings of each tile's encode go to stdout.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "clip-impl.h"
#include "clip.h"
#include "mtmd-image.h"
#include "synthetic_images.h"

namespace {

void put_i32(FILE* f, int32_t v) {
  std::fwrite(&v, 4, 1, f);
}

oracle_images::Rgb image_from_spec(const std::string& spec) {
  oracle_images::Rgb img = oracle_images::make(spec);
  if (!img.rgb.empty()) return img;
  int w = 0, h = 0;
  if (std::sscanf(spec.c_str(), "%dx%d", &w, &h) != 2 || w <= 0 || h <= 0) {
    std::fprintf(stderr, "unknown image '%s'\n", spec.c_str());
    std::exit(2);
  }
  img = {spec, w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        img.rgb[(size_t(y) * w + x) * 3 + c] = uint8_t((x + 2 * y + 50 * c) & 255);
  return img;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MMPROJ OUT.bin THREADS [IMAGE...]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[3]);
  clip_context_params params{};
  params.use_gpu = false;
  params.flash_attn_type = CLIP_FLASH_ATTN_TYPE_AUTO;
  params.image_min_tokens = -1;
  params.image_max_tokens = -1;
  params.warmup = true;
  clip_ctx* ctx = clip_init(argv[1], params).ctx_v;
  if (!ctx) {
    std::fprintf(stderr, "clip_init failed for %s\n", argv[1]);
    return 1;
  }
  const clip_hparams& hp = *clip_get_hparams(ctx);
  // The preprocessor mtmd picks for the file's projector type.
  std::unique_ptr<mtmd_image_preprocessor> pre;
  if (clip_get_projector_type(ctx) == PROJECTOR_TYPE_IDEFICS3)
    pre = std::make_unique<mtmd_image_preprocessor_idefics3>(ctx);
  else if (clip_get_projector_type(ctx) == PROJECTOR_TYPE_GEMMA3 ||
           clip_get_projector_type(ctx) == PROJECTOR_TYPE_MLP)  // LLaVA-1.5: no pinpoints
    pre = std::make_unique<mtmd_image_preprocessor_fixed_size>(ctx);
  else {
    std::fprintf(stderr, "projector type not handled by this harness\n");
    return 1;
  }
  FILE* out = std::fopen(argv[2], "wb");
  std::vector<std::string> names;
  for (int i = 4; i < argc; ++i) names.push_back(argv[i]);
  if (names.empty())
    for (const char* n : oracle_images::kNames) names.push_back(n);

  for (const std::string& name : names) {
    const oracle_images::Rgb src = image_from_spec(name);
    clip_image_u8 u8;
    u8.set_size({src.width, src.height}, false);
    u8.cpy_buf(src.rgb);
    mtmd_image_preproc_out po = pre->preprocess(u8);
    std::vector<const clip_image_f32*> tiles;
    for (const clip_image_f32& e : po.entries) tiles.push_back(&e);
    if (po.has_overview()) tiles.push_back(&po.overview);  // idefics3: overview last

    const int S = tiles.front()->nx();
    const int n_tok = clip_n_output_tokens(ctx, tiles.front());
    const int n_embd = clip_n_mmproj_embd(ctx);
    put_i32(out, int32_t(name.size()));
    std::fwrite(name.data(), 1, name.size(), out);
    for (int32_t v : {po.grid_x, po.grid_y, int32_t(tiles.size()), S, n_tok, n_embd})
      put_i32(out, v);
    const char* max_env = std::getenv("TERN_ORACLE_MAX_TILES");
    if (max_env && std::atoi(max_env) > 0 && tiles.size() > size_t(std::atoi(max_env)))
      tiles.resize(size_t(std::atoi(max_env)));
    for (const clip_image_f32* t : tiles) {
      const std::vector<float>& px = t->get_ro_buf();
      std::vector<uint8_t> back(px.size());
      for (size_t i = 0; i < px.size(); ++i) {
        const int c = int(i % 3);
        back[i] = uint8_t(std::lround((px[i] * hp.image_std[c] + hp.image_mean[c]) * 255.0f));
      }
      std::fwrite(back.data(), 1, back.size(), out);
      std::vector<float> emb(size_t(n_tok) * n_embd);  // clip copies only into a sized buffer
      const auto t0 = std::chrono::steady_clock::now();
      if (!clip_image_encode(ctx, threads, t, emb)) {
        std::fprintf(stderr, "clip_image_encode failed\n");
        return 1;
      }
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%s: tile %dx%d -> %d x %d in %.1f ms (%d threads)\n", name.c_str(), S, S, n_tok,
                  n_embd, ms, threads);
      std::fwrite(emb.data(), 4, emb.size(), out);
    }
  }
  std::fclose(out);
  clip_free(ctx);
  return 0;
}
