#pragma once
// The vision encoder and projector of an mmproj file: preprocessed tiles in,
// embedding rows of the text model's width out.
//
//   tile (S, S, 3) -> [class token] + patch embedding (conv P x P stride P
//     as a GEMM, + bias), + positions               x (T, D), N = (S/P)^2,
//                                                   T = N (+1 with a class token, row 0)
//     -> [pre LN] (CLIP)
//     -> n_blocks_run() x { x += attn(LN1(x)); x += fc2(act(fc1(LN2(x)))) }
//     -> [post LN]                                  (T, D)
//     -> idefics3: pixel shuffle by m (row-major m x m blocks of patches,
//        features concatenated dy-major) -> fc     (N / m^2, d_out)
//     -> gemma3: average pool m x m -> RMS norm * soft_emb_norm
//        -> input_projection                      (N / m^2, d_out)
//     -> mlp (LLaVA): drop the class token -> mm.0 -> GELU (erf) -> mm.2
//                                                 (N, d_out)
//
// Splicing into the text model: PreprocessedImage::layout lists, in prompt
// order, text pieces (special tokens spelled out, to tokenize with special
// tokens enabled) and tile spans; a span of tile i takes tokens_per_tile()
// consecutive rows of encode()'s output starting at row i * tokens_per_tile(),
// each one batch position holding an embedding row instead of a token id.
//
// Two implementations with one interface: VisionEncoder (weights repacked to
// int8 tiles, W8A8 GEMMs and int8 attention products on the task pool, fp32
// layer norms / softmax / GELU) and reference_encode() (fp32 weights, plain
// loops, fp64 accumulation): the oracle the fast path is tested against.
#include <memory>
#include <string>
#include <vector>

#include "tern/vision/mmproj.h"
#include "tern/vision/preprocess.h"

namespace tern {
class TaskPool;
}

namespace tern::vision {

// Embedding rows of one tile (or of a whole image, tiles in layout order).
struct Embeddings {
  int n_tokens = 0;
  int n_embd = 0;
  std::vector<float> data;  // (n_tokens, n_embd)
};

class VisionEncoder;

// A resumable encode of one image (or one tile): preprocessing, then each
// tile in stages -- the patch embedding and each layer's row-wise parts
// (LN1 + QKV; O + residual + LN2 + MLP + residual) a block of row_block
// patch rows at a time, the attention one head at a time -- then the post LN
// and projector. Activations stay in the job between calls; the rows equal
// VisionEncoder::encode's bit for bit (every stage is row- or head-local and
// the kernels give a row the same result in any row range). The encoder and
// the image must outlive it. One thread at a time.
class EncodeJob {
 public:
  ~EncodeJob();
  EncodeJob(EncodeJob&&) noexcept;
  EncodeJob& operator=(EncodeJob&&) noexcept;

  // Runs stages (kernels on pool) until done or until the next one's
  // predicted cost would pass budget_ms; at least one stage a call. Returns
  // done(). Throws what preprocessing throws (InvalidArgument, ImageError).
  bool advance(TaskPool& pool, double budget_ms);
  bool done() const;
  // Every row (all tiles, in layout order): (n_tokens, n_embd). Once, after done().
  Embeddings take();

  // Tile stages (known after preprocessing, which is advance's first step).
  int stages_total() const;
  int stages_done() const;
  int slices() const;      // advance() calls that ran a stage
  double busy_ms() const;  // time spent in them
  // Measured cost of the GEMM-heavy stages (EWMA), which predicts the next
  // stage's cost; seed it from an earlier job so the first slice fits too.
  double ms_per_gflop() const;
  void set_ms_per_gflop(double v);

 private:
  friend class VisionEncoder;
  struct State;
  explicit EncodeJob(std::unique_ptr<State> st);
  std::unique_ptr<State> st_;
};

class VisionEncoder {
 public:
  // Opens and validates the file, repacks the weights. Throws FormatError /
  // IoError as Mmproj::open, InvalidArgument for a projector type the encoder
  // does not run yet.
  static VisionEncoder load(const std::string& path);
  static VisionEncoder from_mmproj(Mmproj mmproj);
  ~VisionEncoder();
  VisionEncoder(VisionEncoder&&) noexcept;
  VisionEncoder& operator=(VisionEncoder&&) noexcept;

  const VisionConfig& config() const;
  int tokens_per_tile() const;  // embedding rows per tile

  // One tile (size = config().image_size).
  Embeddings encode_tile(const PixelTile& tile, TaskPool& pool) const;
  // Preprocess + every tile; rows in the order of the tiles (the layout's
  // spans each take tokens_per_tile() rows).
  Embeddings encode(const Image& img, TaskPool& pool) const;
  PreprocessedImage preprocess(const Image& img) const;

  // The same encode as a resumable job (see EncodeJob); row_block patch rows
  // per row-wise stage (0: all of them).
  static constexpr int kJobRowBlock = 128;
  EncodeJob start_encode(std::shared_ptr<const Image> img, int row_block = kJobRowBlock) const;
  EncodeJob start_encode_tile(PixelTile tile, int row_block = kJobRowBlock) const;

 private:
  struct Impl;
  friend class EncodeJob;
  explicit VisionEncoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The scalar fp32 twin of encode_tile.
Embeddings reference_encode_tile(const Mmproj& mmproj, const PixelTile& tile);

}  // namespace tern::vision
