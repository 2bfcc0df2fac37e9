// tern encode-image: runs the vision encoder of an mmproj file on an image
// (or a synthetic one) and reports the tiles, the token layout and the
// encode time per tile -- the vision half of `tern bench`, comparable with
// llama.cpp's libmtmd on the same file and thread count.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "commands.h"
#include "tern/core/task_pool.h"
#include "tern/vision/encoder.h"

namespace tern::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

vision::Image synthetic_image(int size) {  // a smooth gradient
  vision::Image img{size, size, std::vector<uint8_t>(size_t(size) * size * 3)};
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x)
      for (int c = 0; c < 3; ++c)
        img.rgb[(size_t(y) * size + x) * 3 + c] = uint8_t((x + 2 * y + 50 * c) & 255);
  return img;
}

std::string escaped(const std::string& s) {  // newlines shown as \n
  std::string out;
  for (char ch : s) out += ch == '\n' ? std::string("\\n") : std::string(1, ch);
  return out;
}

}  // namespace

void add_encode_image_command(CLI::App& app) {
  struct Opts {
    std::string mmproj, image, out;
    int size = 0, threads = 0, reps = 3;
    bool tile_only = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("encode-image", "encode an image with an mmproj's vision encoder");
  cmd->add_option("--mmproj", o->mmproj, "projector GGUF")->required();
  cmd->add_option("--image", o->image, "image file (PNG, JPEG, BMP, GIF)");
  cmd->add_option("--size", o->size, "a synthetic square image of this size instead");
  cmd->add_option("-t,--threads", o->threads, "threads (0: one per core)");
  cmd->add_option("-r,--reps", o->reps, "repetitions of each tile's encode (best is reported)");
  cmd->add_flag("--tile-only", o->tile_only, "encode one image_size tile, no preprocessing");
  cmd->add_option("--out", o->out, "write the embeddings, f32 (tokens, n_embd) per tile in order");
  cmd->callback([o] {
    auto t0 = std::chrono::steady_clock::now();
    const vision::VisionEncoder enc = vision::VisionEncoder::load(o->mmproj);
    const double load_s = seconds_since(t0);
    const vision::VisionConfig& c = enc.config();
    vision::Image img;
    if (!o->image.empty()) {
      std::ifstream f(o->image, std::ios::binary);
      if (!f) throw IoError("cannot open " + o->image);
      const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f), {}};
      img = vision::decode_image(bytes);
    } else {
      img = synthetic_image(o->size > 0 ? o->size : c.image_size);
    }
    TaskPool pool(o->threads);
    std::vector<vision::PixelTile> tiles;
    if (o->tile_only) {
      if (img.width != c.image_size || img.height != c.image_size)
        throw InvalidArgument("--tile-only needs an image of exactly image_size");
      tiles.push_back(vision::normalize_tile(img, c.image_mean, c.image_std));
    } else {
      vision::PreprocessedImage pre = enc.preprocess(img);
      std::printf("%dx%d image -> %d x %d tiles + global image, layout:\n", img.width, img.height,
                  pre.grid_x, pre.grid_y);
      for (const vision::ImagePiece& p : pre.layout) {
        if (p.tile >= 0)
          std::printf("  [tile %d: %d embeddings]\n", p.tile, enc.tokens_per_tile());
        else
          std::printf("  \"%s\"\n", escaped(p.text).c_str());
      }
      tiles = std::move(pre.tiles);
    }
    // GEMM work of one tile: 2 * params * patches (attention products added).
    const double N = c.n_patches(), T = c.n_positions(), D = c.d_model, L = c.n_blocks_run();
    const double head = c.projector == vision::ProjectorType::Mlp
                            ? 2.0 * N * (D * c.d_proj_hidden + double(c.d_proj_hidden) * c.d_out)
                            : 2.0 * c.n_output_tokens() * D * c.merge * c.merge * c.d_out;
    const double gemm = 2.0 * N * 3.0 * c.patch_size * c.patch_size * D +
                        2.0 * T * L * (4 * D * D + 2 * D * c.d_ff) + 2.0 * L * 2 * T * T * D + head;
    std::ofstream out;
    if (!o->out.empty()) {
      out.open(o->out, std::ios::binary);
      if (!out) throw IoError("cannot write " + o->out);
    }
    double total = 0;
    for (size_t t = 0; t < tiles.size(); ++t) {
      double best = 1e30;
      for (int r = 0; r < std::max(1, o->reps); ++r) {
        t0 = std::chrono::steady_clock::now();
        const vision::Embeddings e = enc.encode_tile(tiles[t], pool);
        best = std::min(best, seconds_since(t0));
        if (r == 0 && out.is_open())
          out.write(reinterpret_cast<const char*>(e.data.data()),
                    std::streamsize(e.data.size() * sizeof(float)));
      }
      total += best;
      std::printf("tile %zu: %d x %d in %.1f ms (%.1f GFLOP/s)\n", t, enc.tokens_per_tile(),
                  c.d_out, best * 1e3, gemm / best / 1e9);
    }
    std::printf("%s: load %.2f s, %zu tiles, encode %.3f s on %d threads\n", o->mmproj.c_str(),
                load_s, tiles.size(), total, pool.size());
  });
}

}  // namespace tern::cli
