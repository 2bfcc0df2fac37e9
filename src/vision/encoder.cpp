// The fast vision encoder: weights repacked once to int8 tiles (W8A8 GEMMs on
// the task pool), attention products on the same int8 kernels (K and V^T
// packed per head as "weights"), fp32 layer norms, softmax and GELU.
#include "tern/vision/encoder.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <span>

#include "staged_job.h"
#include "tern/core/error.h"
#include "tern/core/task_pool.h"
#include "vit_common.h"
#include "vit_ops.h"

namespace tern::vision {
namespace {

using detail::Block;
using detail::Floats;
using detail::Linear;
using detail::Norm;

}  // namespace

struct VisionEncoder::Impl {
  Mmproj mm;
  VisionConfig c;
  Linear patch;  // (D, 3 P^2 padded)
  Floats pos;    // (N, D)
  std::vector<Block> layers;
  Floats class_embd;  // CLIP: (D), the sequence's row 0 (before the patches)
  Norm pre_ln;        // CLIP: after the positions; empty when the file has none
  Norm post_ln;       // empty when the file has none
  Linear fc;          // idefics3: (d_out, D m^2); gemma3: (d_out, D); mlp: mm.0 (H, D)
  Linear fc2;         // mlp: mm.2 (d_out, H)
  Floats soft_norm;   // gemma3: (D)
  Floats ones;        // (d_ff): GELU runs as geglu(x, 1); quick GELU as swiglu(1.702 x, 1/1.702)

  explicit Impl(Mmproj m);
  // f (T, d_ff) = act(f), the file's FFN activation
  void ffn_activation(float* f, int T, TaskPool& pool) const;
  void layer_norm(const Norm& n, const float* x, float* y, int T, TaskPool& pool) const {
    detail::layer_norm(n, c.ln_eps, x, y, T, pool);
  }
};

VisionEncoder::Impl::Impl(Mmproj m) : mm(std::move(m)), c(mm.config()) {
  if (c.d_model % kernels::kGroup != 0)
    throw InvalidArgument("vision encoder: embedding width " + std::to_string(c.d_model) +
                          " is not a multiple of 32");
  if (c.patches_per_side() % c.merge != 0)
    throw InvalidArgument("vision encoder: patches per side not a multiple of the scale factor");
  const VisionWeights& w = mm.weights();
  patch = detail::make_linear(w.patch_w, w.patch_b);
  pos = detail::to_floats(w.pos_embd);
  if (c.has_class_embd) class_embd = detail::to_floats(w.class_embd);
  if (c.has_pre_ln) pre_ln = detail::make_norm(w.pre_ln_w, w.pre_ln_b);
  for (const VisionLayerWeights& L : std::span(w.layers).first(size_t(c.n_blocks_run())))
    layers.push_back(detail::make_block(L));
  if (c.has_post_ln) post_ln = detail::make_norm(w.post_ln_w, w.post_ln_b);
  if (c.projector == ProjectorType::Idefics3) {
    fc = detail::make_linear(w.fc_w, nullptr);
  } else if (c.projector == ProjectorType::Mlp) {
    fc = detail::make_linear(w.mm0_w, w.mm0_b);
    fc2 = detail::make_linear(w.mm2_w, w.mm2_b);
  } else {  // gemma3: the projection is stored [d_out, D]; pack its transpose
    const Floats p = detail::to_floats(w.input_proj_w);  // (D, d_out)
    Floats t(p.size());
    for (int d = 0; d < c.d_model; ++d)
      for (int o = 0; o < c.d_out; ++o) t[size_t(o) * c.d_model + d] = p[size_t(d) * c.d_out + o];
    fc = Linear{detail::pack_rows(t.data(), c.d_out, c.d_model), Floats(size_t(c.d_out), 0.0f),
                c.d_model};
    soft_norm = detail::to_floats(w.soft_norm_w);
  }
  ones.assign(size_t(c.d_ff),
              c.ffn == VisionFfn::GeluQuick ? 1.0f / detail::kQuickGeluScale : 1.0f);
}

void VisionEncoder::Impl::ffn_activation(float* f, int T, TaskPool& pool) const {
  const int F = c.d_ff;
  pool.parallel_for(T, 16, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      float* r = f + t * F;
      switch (c.ffn) {
        case VisionFfn::Gelu:
          kernels::geglu(r, ones.data(), r, F);
          break;
        case VisionFfn::GeluQuick:  // x sigmoid(1.702 x) = silu(1.702 x) / 1.702
          for (int i = 0; i < F; ++i) r[i] *= detail::kQuickGeluScale;
          kernels::swiglu(r, ones.data(), r, F);
          break;
        case VisionFfn::Silu:
          kernels::swiglu(r, ones.data(), r, F);
          break;
      }
    }
  });
}

// The stages of one tile, in order (T positions: a class token, when the
// file has one, then the N patches; nbp row blocks of the patches, nbt of
// the positions, H heads):
//   nbp x patch embedding + positions (the last also the class token and
//   CLIP's pre-LN),
//   per layer: nbt x {LN1, Q K V}, H x attention head, nbt x {O, +x, LN2, fc1, act, fc2, +x},
//   1 x {post LN, merge or mlp, projector}.
struct EncodeJob::State {
  using Impl = VisionEncoder::Impl;
  const Impl& m;
  std::shared_ptr<const Image> image;  // to preprocess first (null when tiles came ready)
  std::vector<PixelTile> tiles;
  int rb = 0;        // rows per row-wise stage
  int T = 0;         // positions: the patches and the class token (row 0) if any
  int first = 0;     // the first patch's row: 1 with a class token
  int nbp = 0;       // row blocks of the patches
  int nb = 0;        // row blocks of the positions
  int per_tile = 0;  // stages per tile
  int next = 0;      // stages done over all tiles
  Embeddings out;
  bool taken = false;
  // The current tile's activations.
  Floats patches;            // (N, patch.n_in)
  Floats x, xn, q, k, v, a;  // (T, D)
  Floats f;                  // (rb, F)
  detail::AttnScratch attn;
  detail::JobPacing pacing;

  State(const Impl& impl, std::vector<PixelTile> t, std::shared_ptr<const Image> img, int row_block)
      : m(impl), image(std::move(img)), tiles(std::move(t)) {
    const int N = m.c.n_patches();
    T = m.c.n_positions();
    first = T - N;
    rb = row_block <= 0 ? T : std::min(row_block, T);
    nbp = (N + rb - 1) / rb;
    nb = (T + rb - 1) / rb;
    per_tile = nbp + int(m.layers.size()) * (2 * nb + m.c.n_heads) + 1;
    out.n_embd = m.c.d_out;
  }
  bool preprocessing() const { return image != nullptr; }
  int total() const { return int(tiles.size()) * per_tile; }
  bool done() const { return !preprocessing() && next >= total(); }
  double gflop(int s) const;  // of tile stage s
  void run(int s, const PixelTile& tile, TaskPool& pool);
  // For detail::advance_stages:
  void preprocess(TaskPool&) {
    tiles = vision::preprocess(m.c, *image).tiles;
    image.reset();
  }
  double next_gflop() const { return gflop(next % per_tile); }
  void run_next(TaskPool& pool) {
    run(next % per_tile, tiles[size_t(next / per_tile)], pool);
    ++next;
  }
  void finish_tile(TaskPool& pool);
};

double EncodeJob::State::gflop(int s) const {
  const VisionConfig& c = m.c;
  const double N = c.n_patches(), D = c.d_model, F = c.d_ff, rows = rb;
  if (s < nbp) return 2 * rows * m.patch.w.n_in * D * 1e-9;
  if (s == per_tile - 1) {
    if (c.projector == ProjectorType::Mlp)
      return 2 * N * (m.fc.w.n_in * m.fc.w.n_out + m.fc2.w.n_in * c.d_out) * 1e-9;
    return 2 * (N / (c.merge * c.merge)) * m.fc.w.n_in * c.d_out * 1e-9;
  }
  const int r = (s - nbp) % (2 * nb + c.n_heads);
  if (r < nb) return 2 * rows * 3 * D * D * 1e-9;
  if (r < nb + c.n_heads) return 4 * double(T) * T * c.head_dim() * 1e-9;
  return 2 * rows * (D * D + 2 * D * F) * 1e-9;
}

void EncodeJob::State::run(int s, const PixelTile& tile, TaskPool& pool) {
  const VisionConfig& c = m.c;
  const int N = c.n_patches(), D = c.d_model, F = c.d_ff;
  auto rows_of = [&](int b, int n_rows) {
    return std::pair{b * rb, std::min(n_rows, (b + 1) * rb) - b * rb};
  };
  auto add = [&](float* y, const float* dy, int r0, int n) {
    for (size_t i = size_t(r0) * D; i < size_t(r0 + n) * D; ++i) y[i] += dy[i];
  };
  if (s == 0) {  // a new tile: patches (N, 3 P^2 padded)
    patches.resize(size_t(N) * m.patch.n_in);
    detail::extract_patches(tile.pixels.data(), c.image_size, c.patch_size, m.patch.n_in,
                            patches.data());
    for (Floats* b : {&x, &xn, &q, &k, &v, &a}) b->resize(size_t(T) * D);
    f.resize(size_t(rb) * F);
  }
  if (s < nbp) {  // x = patches W^T + b + positions (patch rows follow the class token)
    const auto [r0, n] = rows_of(s, N);
    detail::linear(m.patch, &patches[size_t(r0) * m.patch.n_in], n, &x[size_t(first + r0) * D],
                   pool);
    add(x.data(), m.pos.data(), first + r0, n);
    if (s == nbp - 1) {
      if (first > 0) {  // the class token, with its position
        std::copy(m.class_embd.begin(), m.class_embd.end(), x.begin());
        add(x.data(), m.pos.data(), 0, 1);
      }
      if (c.has_pre_ln) {  // CLIP's pre-LN over every position
        m.layer_norm(m.pre_ln, x.data(), xn.data(), T, pool);
        x.swap(xn);
      }
    }
    return;
  }
  if (s == per_tile - 1) return finish_tile(pool);
  const Block& L = m.layers[size_t((s - nbp) / (2 * nb + c.n_heads))];
  const int r = (s - nbp) % (2 * nb + c.n_heads);
  if (r < nb) {  // q, k, v = LN1(x)
    const auto [r0, n] = rows_of(r, T);
    const size_t o = size_t(r0) * D;
    m.layer_norm(L.ln1, &x[o], &xn[o], n, pool);
    detail::qkv(L, &xn[o], n, &q[o], &k[o], &v[o], pool);
  } else if (r < nb + c.n_heads) {  // a = attn(q, k, v), one head
    detail::attention_head(q.data(), k.data(), v.data(), a.data(), T, D, c.head_dim(), r - nb, attn,
                           pool);
  } else {  // x += o(a); x += fc2(act(fc1(LN2(x))))
    const auto [r0, n] = rows_of(r - nb - c.n_heads, T);
    const size_t o = size_t(r0) * D;
    detail::block_out_rows(
        L, c.ln_eps, &a[o], &x[o], &xn[o], &q[o], f.data(), n, D,
        [&](float* rows, int n_rows) { m.ffn_activation(rows, n_rows, pool); }, pool);
  }
}

// Post LN, merge and projector; the tile's rows are appended to out.
void EncodeJob::State::finish_tile(TaskPool& pool) {
  const VisionConfig& c = m.c;
  const int N = c.n_patches(), D = c.d_model, side = c.patches_per_side();
  if (c.has_post_ln) {
    m.layer_norm(m.post_ln, x.data(), xn.data(), T, pool);
    x.swap(xn);
  }
  if (c.projector == ProjectorType::Mlp) {
    // Drop the class token; mm.2(GELU(mm.0(x))): (N, d_out).
    Floats h(size_t(N) * m.fc.w.n_out);
    detail::linear(m.fc, x.data() + size_t(first) * D, N, h.data(), pool);
    pool.parallel_for(int64_t(h.size()), 4096, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) h[size_t(i)] = detail::gelu_erf(h[size_t(i)]);
    });
    const size_t at = out.data.size();
    out.data.resize(at + size_t(N) * c.d_out);
    detail::linear(m.fc2, h.data(), N, out.data.data() + at, pool);
    out.n_tokens += N;
    return;
  }
  const int mg = c.merge, n_out = N / (mg * mg);
  Floats merged(size_t(N) * D);
  if (c.projector == ProjectorType::Idefics3) {
    detail::pixel_shuffle(x.data(), side, D, mg, merged.data());  // (n_out, D m^2)
  } else {
    detail::avg_pool(x.data(), side, D, mg, merged.data());  // (n_out, D)
    for (int t = 0; t < n_out; ++t)
      detail::rms_norm(&merged[size_t(t) * D], m.soft_norm.data(), D, c.ln_eps);
  }
  const size_t at = out.data.size();
  out.data.resize(at + size_t(n_out) * c.d_out);
  detail::linear(m.fc, merged.data(), n_out, out.data.data() + at, pool);
  out.n_tokens += n_out;
}

EncodeJob::EncodeJob(std::unique_ptr<State> st) : st_(std::move(st)) {}
EncodeJob::~EncodeJob() = default;
EncodeJob::EncodeJob(EncodeJob&&) noexcept = default;
EncodeJob& EncodeJob::operator=(EncodeJob&&) noexcept = default;

bool EncodeJob::advance(TaskPool& pool, double budget_ms) {
  State& st = *st_;
  detail::advance_stages(st, st.pacing, pool, budget_ms);
  if (st.done()) {  // the activations are no longer needed
    for (Floats* b : {&st.patches, &st.x, &st.xn, &st.q, &st.k, &st.v, &st.a, &st.f})
      Floats().swap(*b);
  }
  return st.done();
}

bool EncodeJob::done() const {
  return st_->done();
}
Embeddings EncodeJob::take() {
  if (!done() || st_->taken) throw InvalidArgument("EncodeJob::take: not done, or taken already");
  st_->taken = true;
  return std::move(st_->out);
}
int EncodeJob::stages_total() const {
  return st_->total();
}
int EncodeJob::stages_done() const {
  return st_->next;
}
int EncodeJob::slices() const {
  return st_->pacing.slices;
}
double EncodeJob::busy_ms() const {
  return st_->pacing.busy_ms;
}
double EncodeJob::ms_per_gflop() const {
  return st_->pacing.ms_per_gflop;
}
void EncodeJob::set_ms_per_gflop(double v) {
  st_->pacing.ms_per_gflop = v;
}

VisionEncoder::VisionEncoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VisionEncoder::~VisionEncoder() = default;
VisionEncoder::VisionEncoder(VisionEncoder&&) noexcept = default;
VisionEncoder& VisionEncoder::operator=(VisionEncoder&&) noexcept = default;

VisionEncoder VisionEncoder::load(const std::string& path) {
  return from_mmproj(Mmproj::open(path));
}
VisionEncoder VisionEncoder::from_mmproj(Mmproj mmproj) {
  return VisionEncoder(std::make_unique<Impl>(std::move(mmproj)));
}

const VisionConfig& VisionEncoder::config() const {
  return impl_->c;
}
int VisionEncoder::tokens_per_tile() const {
  return impl_->c.n_output_tokens();
}
PreprocessedImage VisionEncoder::preprocess(const Image& img) const {
  return vision::preprocess(impl_->c, img);
}

Embeddings VisionEncoder::encode_tile(const PixelTile& tile, TaskPool& pool) const {
  EncodeJob job = start_encode_tile(tile, 0);
  job.advance(pool, std::numeric_limits<double>::infinity());
  return job.take();
}

Embeddings VisionEncoder::encode(const Image& img, TaskPool& pool) const {
  EncodeJob job(std::make_unique<EncodeJob::State>(*impl_, preprocess(img).tiles, nullptr, 0));
  job.advance(pool, std::numeric_limits<double>::infinity());
  return job.take();
}

EncodeJob VisionEncoder::start_encode(std::shared_ptr<const Image> img, int row_block) const {
  if (!img) throw InvalidArgument("start_encode: no image");
  return EncodeJob(std::make_unique<EncodeJob::State>(*impl_, std::vector<PixelTile>{},
                                                      std::move(img), row_block));
}

EncodeJob VisionEncoder::start_encode_tile(PixelTile tile, int row_block) const {
  const int S = impl_->c.image_size;
  if (tile.size != S || tile.pixels.size() != size_t(S) * S * 3)
    throw InvalidArgument("tile size does not match the encoder's image_size");
  std::vector<PixelTile> tiles;
  tiles.push_back(std::move(tile));
  return EncodeJob(
      std::make_unique<EncodeJob::State>(*impl_, std::move(tiles), nullptr, row_block));
}

}  // namespace tern::vision
