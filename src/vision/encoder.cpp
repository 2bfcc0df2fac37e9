// The fast vision encoder: weights repacked once to int8 tiles (W8A8 GEMMs on
// the task pool), attention products on the same int8 kernels (K and V^T
// packed per head as "weights"), fp32 layer norms, softmax and GELU.
#include "tern/vision/encoder.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <span>

#include "tern/core/error.h"
#include "tern/core/task_pool.h"
#include "tern/kernels/ops.h"
#include "tern/kernels/packed.h"
#include "vit_common.h"

namespace tern::vision {
namespace {

using kernels::PackedMatrix;
using kernels::QuantizedActs;
using Floats = std::vector<float>;

int round_up(int n, int to) {
  return (n + to - 1) / to * to;
}

// Rows of n_in floats, zero-padded to a multiple of the quantization group,
// repacked to int8 (n_out rows).
PackedMatrix pack_rows(const float* x, int n_out, int n_in) {
  const int padded = round_up(n_in, kernels::kGroup);
  if (padded == n_in)
    return kernels::pack_matrix(DType::F32, x, n_out, n_in, kernels::WeightFormat::Int8Sym);
  Floats tmp(size_t(n_out) * padded, 0.0f);
  for (int r = 0; r < n_out; ++r) std::copy_n(x + size_t(r) * n_in, n_in, &tmp[size_t(r) * padded]);
  return kernels::pack_matrix(DType::F32, tmp.data(), n_out, padded,
                              kernels::WeightFormat::Int8Sym);
}

// A GGUF matrix [n_in, n_out] (or conv kernel [P, P, 3, n_out]) as a packed
// (n_out, n_in) weight. Sources whose rows fit the group are repacked
// directly (Q8_0 exactly).
PackedMatrix pack_tensor(Tensor t) {
  const int n_out = int(t->dims.back());
  const int n_in = int(t->n_elements() / n_out);
  if (n_in % kernels::kGroup == 0)
    return kernels::pack_matrix(t->type, t->data, n_out, n_in, kernels::WeightFormat::Int8Sym);
  const Floats f = detail::to_floats(t);
  return pack_rows(f.data(), n_out, n_in);
}

// e^x for x <= 0 (softmax after subtracting the row maximum): 2^(x log2 e)
// split into an integer power i (built in the exponent bits) and 2^f,
// f = t - i in (-1, 0] (truncation is the ceiling for t <= 0), by its Taylor
// polynomial (relative error < 2e-5, far below the int8 quantization of the
// probabilities that follows). Branch-free and call-free so the softmax loop
// vectorizes; libm's expf cost a fifth of the encode time.
inline float exp_nonpositive(float x) {
  float t = x * 1.44269504f;
  t = t < -126.0f ? -126.0f : t;
  const int i = int(t);
  const float f = t - float(i);
  const float p =
      1.0f +
      f * (0.69314718f +
           f * (0.24022651f +
                f * (0.05550411f + f * (0.00961813f + f * (0.00133336f + f * 0.00015404f)))));
  return p * std::bit_cast<float>((i + 127) << 23);
}

// p (n) = softmax(p) in place. Reductions run in 8 independent lanes: without
// -ffast-math the compiler may not reorder a float sum, so a single
// accumulator would keep the loop scalar.
void softmax_row(float* p, int n) {
  constexpr int kLanes = 8;
  const int n8 = n / kLanes * kLanes;
  float lane[kLanes];
  std::fill_n(lane, kLanes, -INFINITY);
  for (int j = 0; j < n8; j += kLanes)
    for (int k = 0; k < kLanes; ++k) lane[k] = lane[k] > p[j + k] ? lane[k] : p[j + k];
  float mx = -INFINITY;
  for (int k = 0; k < kLanes; ++k) mx = std::max(mx, lane[k]);
  for (int j = n8; j < n; ++j) mx = std::max(mx, p[j]);
  for (int j = 0; j < n; ++j) p[j] = exp_nonpositive(p[j] - mx);
  std::fill_n(lane, kLanes, 0.0f);
  for (int j = 0; j < n8; j += kLanes)
    for (int k = 0; k < kLanes; ++k) lane[k] += p[j + k];
  float sum = 0;
  for (int k = 0; k < kLanes; ++k) sum += lane[k];
  for (int j = n8; j < n; ++j) sum += p[j];
  const float inv = 1.0f / sum;
  for (int j = 0; j < n; ++j) p[j] *= inv;
}

Floats floats_or_zeros(Tensor t, int n) {
  return t ? detail::to_floats(t) : Floats(size_t(n), 0.0f);
}

struct Linear {
  PackedMatrix w;  // (n_out, n_in padded to the group)
  Floats b;        // (n_out)
  int n_in = 0;    // the input rows' real width (Gemma 3's d_ff 4304 and 3*14*14 are not
                   // multiples of 32: those rows are zero-padded before quantization)
};

Linear make_linear(Tensor w, Tensor b) {
  Linear l{pack_tensor(w), {}, 0};
  l.b = floats_or_zeros(b, l.w.n_out);
  l.n_in = int(w->n_elements() / w->dims.back());
  return l;
}

struct Norm {
  Floats w, b;  // (D)
};

struct Layer {
  Norm ln1, ln2;
  Linear q, k, v, o, up, down;
};

}  // namespace

struct VisionEncoder::Impl {
  Mmproj mm;
  VisionConfig c;
  Linear patch;  // (D, 3 P^2 padded)
  Floats pos;    // (N, D)
  std::vector<Layer> layers;
  Floats class_embd;  // CLIP: (D), the sequence's row 0 (before the patches)
  Norm pre_ln;        // CLIP: after the positions; empty when the file has none
  Norm post_ln;       // empty when the file has none
  Linear fc;          // idefics3: (d_out, D m^2); gemma3: (d_out, D); mlp: mm.0 (H, D)
  Linear fc2;         // mlp: mm.2 (d_out, H)
  Floats soft_norm;   // gemma3: (D)
  Floats ones;        // (d_ff): GELU runs as geglu(x, 1); quick GELU as swiglu(1.702 x, 1/1.702)

  explicit Impl(Mmproj m);
  // x (T, n_in) -> y (T, n_out) = x W^T + b
  void linear(const Linear& l, const float* x, int T, float* y, TaskPool& pool) const;
  // q, k, v (T, D) from xn (T, D)
  void qkv(const Layer& L, const float* xn, int T, float* q, float* k, float* v,
           TaskPool& pool) const;
  void layer_norm(const Norm& n, const float* x, float* y, int T, TaskPool& pool) const;
  // f (T, d_ff) = act(f), the file's FFN activation
  void ffn_activation(float* f, int T, TaskPool& pool) const;
  // One head's share of attention (below); scratch reused between heads.
  struct AttnScratch {
    Floats qh, kh, vt, dense, scores, oh;
    QuantizedActs qa;
  };
  void attention_head(const float* q, const float* k, const float* v, float* out, int T, int h,
                      AttnScratch& s, TaskPool& pool) const;
};

VisionEncoder::Impl::Impl(Mmproj m) : mm(std::move(m)), c(mm.config()) {
  if (c.d_model % kernels::kGroup != 0)
    throw InvalidArgument("vision encoder: embedding width " + std::to_string(c.d_model) +
                          " is not a multiple of 32");
  if (c.patches_per_side() % c.merge != 0)
    throw InvalidArgument("vision encoder: patches per side not a multiple of the scale factor");
  const VisionWeights& w = mm.weights();
  patch = make_linear(w.patch_w, w.patch_b);
  pos = detail::to_floats(w.pos_embd);
  if (c.has_class_embd) class_embd = detail::to_floats(w.class_embd);
  if (c.has_pre_ln) pre_ln = {detail::to_floats(w.pre_ln_w), detail::to_floats(w.pre_ln_b)};
  for (const VisionLayerWeights& L : std::span(w.layers).first(size_t(c.n_blocks_run())))
    layers.push_back(Layer{{detail::to_floats(L.ln1_w), detail::to_floats(L.ln1_b)},
                           {detail::to_floats(L.ln2_w), detail::to_floats(L.ln2_b)},
                           make_linear(L.q_w, L.q_b),
                           make_linear(L.k_w, L.k_b),
                           make_linear(L.v_w, L.v_b),
                           make_linear(L.o_w, L.o_b),
                           make_linear(L.up_w, L.up_b),
                           make_linear(L.down_w, L.down_b)});
  if (c.has_post_ln) post_ln = {detail::to_floats(w.post_ln_w), detail::to_floats(w.post_ln_b)};
  if (c.projector == ProjectorType::Idefics3) {
    fc = make_linear(w.fc_w, nullptr);
  } else if (c.projector == ProjectorType::Mlp) {
    fc = make_linear(w.mm0_w, w.mm0_b);
    fc2 = make_linear(w.mm2_w, w.mm2_b);
  } else {  // gemma3: the projection is stored [d_out, D]; pack its transpose
    const Floats p = detail::to_floats(w.input_proj_w);  // (D, d_out)
    Floats t(p.size());
    for (int d = 0; d < c.d_model; ++d)
      for (int o = 0; o < c.d_out; ++o) t[size_t(o) * c.d_model + d] = p[size_t(d) * c.d_out + o];
    fc = Linear{pack_rows(t.data(), c.d_out, c.d_model), Floats(size_t(c.d_out), 0.0f), c.d_model};
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

// y (T, n_out) += b (n_out)
static void add_bias(const Floats& b, float* y, int T, TaskPool& pool) {
  const int n_out = int(b.size());
  pool.parallel_for(T, 64, [&](int64_t lo, int64_t hi, int) {
    for (int64_t t = lo; t < hi; ++t)
      for (int o = 0; o < n_out; ++o) y[t * n_out + o] += b[size_t(o)];
  });
}

void VisionEncoder::Impl::linear(const Linear& l, const float* x, int T, float* y,
                                 TaskPool& pool) const {
  // x rows are l.n_in wide; padded to l.w.n_in when that differs.
  Floats padded;
  if (l.n_in != l.w.n_in) {
    padded.assign(size_t(T) * l.w.n_in, 0.0f);
    for (int t = 0; t < T; ++t)
      std::copy_n(x + size_t(t) * l.n_in, l.n_in, &padded[size_t(t) * l.w.n_in]);
    x = padded.data();
  }
  QuantizedActs qa;
  kernels::quantize_activations(x, T, l.w.n_in, qa, pool);
  kernels::matmul(l.w, qa, y, pool);
  add_bias(l.b, y, T, pool);
}

void VisionEncoder::Impl::qkv(const Layer& L, const float* xn, int T, float* q, float* k, float* v,
                              TaskPool& pool) const {
  // One quantization of xn and one dispatch for the three products.
  QuantizedActs qa;
  kernels::quantize_activations(xn, T, L.q.w.n_in, qa, pool);
  kernels::matmul({{&L.q.w, q}, {&L.k.w, k}, {&L.v.w, v}}, qa, pool);
  add_bias(L.q.b, q, T, pool);
  add_bias(L.k.b, k, T, pool);
  add_bias(L.v.b, v, T, pool);
}

void VisionEncoder::Impl::layer_norm(const Norm& n, const float* x, float* y, int T,
                                     TaskPool& pool) const {
  const int D = c.d_model;
  pool.parallel_for(T, 32, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      const float* r = x + t * D;
      float* o = y + t * D;
      float mean = 0;
      for (int i = 0; i < D; ++i) mean += r[i];
      mean /= float(D);
      float var = 0;
      for (int i = 0; i < D; ++i) var += (r[i] - mean) * (r[i] - mean);
      const float inv = 1.0f / std::sqrt(var / float(D) + c.ln_eps);
      for (int i = 0; i < D; ++i) o[i] = (r[i] - mean) * inv * n.w[size_t(i)] + n.b[size_t(i)];
    }
  });
}

// q, k, v, out (T, D); head h: S = (q_h / sqrt(hd)) K_h^T (int8), softmax
// in fp32, out_h = P V_h (int8, V_h^T packed as the weight); writes out's
// columns [h hd, (h + 1) hd). Query rows go in blocks of kRows so a block's
// scores (kRows, T) stay in L2 from the Q K^T product through the softmax to
// the P V product (the whole (T, T) matrix is 4 MB at T = 1024, and
// streaming it through memory five times a head cost as much as the GEMMs).
void VisionEncoder::Impl::attention_head(const float* q, const float* k, const float* v, float* out,
                                         int T, int h, AttnScratch& s, TaskPool& pool) const {
  constexpr int kRows = 128;
  const int D = c.d_model, hd = c.head_dim();
  const int hdp = round_up(hd, kernels::kGroup), Tp = round_up(T, kernels::kGroup);
  const float scale = 1.0f / std::sqrt(float(hd));
  s.qh.assign(size_t(T) * hdp, 0.0f);
  s.kh.resize(size_t(T) * hd);
  s.vt.resize(size_t(hd) * T);
  s.dense.resize(size_t(kRows) * T);
  s.scores.assign(size_t(kRows) * Tp, 0.0f);
  s.oh.resize(size_t(kRows) * hd);
  for (int t = 0; t < T; ++t)
    for (int d = 0; d < hd; ++d) {
      s.qh[size_t(t) * hdp + d] = q[size_t(t) * D + h * hd + d] * scale;
      s.kh[size_t(t) * hd + d] = k[size_t(t) * D + h * hd + d];
      s.vt[size_t(d) * T + t] = v[size_t(t) * D + h * hd + d];
    }
  const PackedMatrix kw = pack_rows(s.kh.data(), T, hd);  // (T, hdp)
  const PackedMatrix vw = pack_rows(s.vt.data(), hd, T);  // (hd, Tp)
  for (int r0 = 0; r0 < T; r0 += kRows) {
    const int R = std::min(kRows, T - r0);
    kernels::quantize_activations(&s.qh[size_t(r0) * hdp], R, hdp, s.qa, pool);
    // matmul writes (R, T) densely; the softmax spreads rows to Tp (zero tail).
    kernels::matmul(kw, s.qa, s.dense.data(), pool);
    pool.parallel_for(R, 16, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) {
        float* p = &s.scores[size_t(i) * Tp];
        std::copy_n(&s.dense[size_t(i) * T], T, p);
        softmax_row(p, T);
      }
    });
    kernels::quantize_activations(s.scores.data(), R, Tp, s.qa, pool);
    kernels::matmul(vw, s.qa, s.oh.data(), pool);
    for (int t = 0; t < R; ++t)
      std::copy_n(&s.oh[size_t(t) * hd], hd, out + size_t(r0 + t) * D + h * hd);
  }
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
  Impl::AttnScratch attn;
  int slices = 0;
  double busy_ms = 0, ms_per_gflop = 0;

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
    m.linear(m.patch, &patches[size_t(r0) * m.patch.n_in], n, &x[size_t(first + r0) * D], pool);
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
  const Layer& L = m.layers[size_t((s - nbp) / (2 * nb + c.n_heads))];
  const int r = (s - nbp) % (2 * nb + c.n_heads);
  if (r < nb) {  // q, k, v = LN1(x)
    const auto [r0, n] = rows_of(r, T);
    const size_t o = size_t(r0) * D;
    m.layer_norm(L.ln1, &x[o], &xn[o], n, pool);
    m.qkv(L, &xn[o], n, &q[o], &k[o], &v[o], pool);
  } else if (r < nb + c.n_heads) {  // a = attn(q, k, v), one head
    m.attention_head(q.data(), k.data(), v.data(), a.data(), T, r - nb, attn, pool);
  } else {  // x += o(a); x += fc2(act(fc1(LN2(x))))
    const auto [r0, n] = rows_of(r - nb - c.n_heads, T);
    const size_t o = size_t(r0) * D;
    m.linear(L.o, &a[o], n, &q[o], pool);
    add(x.data(), q.data(), r0, n);
    m.layer_norm(L.ln2, &x[o], &xn[o], n, pool);
    m.linear(L.up, &xn[o], n, f.data(), pool);
    m.ffn_activation(f.data(), n, pool);
    m.linear(L.down, f.data(), n, &q[o], pool);
    add(x.data(), q.data(), r0, n);
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
    m.linear(m.fc, x.data() + size_t(first) * D, N, h.data(), pool);
    pool.parallel_for(int64_t(h.size()), 4096, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) h[size_t(i)] = detail::gelu_erf(h[size_t(i)]);
    });
    const size_t at = out.data.size();
    out.data.resize(at + size_t(N) * c.d_out);
    m.linear(m.fc2, h.data(), N, out.data.data() + at, pool);
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
  m.linear(m.fc, merged.data(), n_out, out.data.data() + at, pool);
  out.n_tokens += n_out;
}

EncodeJob::EncodeJob(std::unique_ptr<State> st) : st_(std::move(st)) {}
EncodeJob::~EncodeJob() = default;
EncodeJob::EncodeJob(EncodeJob&&) noexcept = default;
EncodeJob& EncodeJob::operator=(EncodeJob&&) noexcept = default;

bool EncodeJob::advance(TaskPool& pool, double budget_ms) {
  State& st = *st_;
  using Clock = std::chrono::steady_clock;
  const auto ms_since = [](Clock::time_point a) {
    return std::chrono::duration<double, std::milli>(Clock::now() - a).count();
  };
  const auto t0 = Clock::now();
  int ran = 0;
  while (!st.done()) {
    if (st.preprocessing()) {  // first: the tiles
      st.tiles = vision::preprocess(st.m.c, *st.image).tiles;
      st.image.reset();
      ++ran;
      continue;
    }
    const int s = st.next % st.per_tile;
    const double g = st.gflop(s);
    if (ran > 0 && ms_since(t0) + g * st.ms_per_gflop > budget_ms) break;
    const auto t1 = Clock::now();
    st.run(s, st.tiles[size_t(st.next / st.per_tile)], pool);
    const double ms = ms_since(t1);
    if (g > 0) {
      const double rate = ms / g;
      st.ms_per_gflop =
          st.ms_per_gflop > 0 ? st.ms_per_gflop + 0.3 * (rate - st.ms_per_gflop) : rate;
    }
    ++st.next;
    ++ran;
  }
  if (ran > 0) {
    st.slices += 1;
    st.busy_ms += ms_since(t0);
  }
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
  return st_->slices;
}
double EncodeJob::busy_ms() const {
  return st_->busy_ms;
}
double EncodeJob::ms_per_gflop() const {
  return st_->ms_per_gflop;
}
void EncodeJob::set_ms_per_gflop(double v) {
  st_->ms_per_gflop = v;
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
