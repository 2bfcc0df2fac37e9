// The fast vision encoder: weights repacked once to int8 tiles (W8A8 GEMMs on
// the task pool), attention products on the same int8 kernels (K and V^T
// packed per head as "weights"), fp32 layer norms, softmax and GELU.
#include "tern/vision/encoder.h"

#include <algorithm>
#include <bit>
#include <cmath>
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
  void attention(const float* q, const float* k, const float* v, float* out, int T,
                 TaskPool& pool) const;
  // f (T, d_ff) = act(f), the file's FFN activation
  void ffn_activation(float* f, int T, TaskPool& pool) const;
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

// q, k, v, out (T, D); per head: S = (q_h / sqrt(hd)) K_h^T (int8), softmax
// in fp32, out_h = P V_h (int8, V_h^T packed as the weight). Query rows go in
// blocks of kRows so a block's scores (kRows, T) stay in L2 from the Q K^T
// product through the softmax to the P V product (the whole (T, T) matrix
// is 4 MB at T = 1024, and streaming it through memory five times a head
// cost as much as the GEMMs).
void VisionEncoder::Impl::attention(const float* q, const float* k, const float* v, float* out,
                                    int T, TaskPool& pool) const {
  constexpr int kRows = 128;
  const int D = c.d_model, H = c.n_heads, hd = c.head_dim();
  const int hdp = round_up(hd, kernels::kGroup), Tp = round_up(T, kernels::kGroup);
  const float scale = 1.0f / std::sqrt(float(hd));
  Floats qh(size_t(T) * hdp, 0.0f), kh(size_t(T) * hd), vt(size_t(hd) * T);
  Floats dense(size_t(kRows) * T), scores(size_t(kRows) * Tp, 0.0f), oh(size_t(kRows) * hd);
  QuantizedActs qa;
  for (int h = 0; h < H; ++h) {
    for (int t = 0; t < T; ++t)
      for (int d = 0; d < hd; ++d) {
        qh[size_t(t) * hdp + d] = q[size_t(t) * D + h * hd + d] * scale;
        kh[size_t(t) * hd + d] = k[size_t(t) * D + h * hd + d];
        vt[size_t(d) * T + t] = v[size_t(t) * D + h * hd + d];
      }
    const PackedMatrix kw = pack_rows(kh.data(), T, hd);  // (T, hdp)
    const PackedMatrix vw = pack_rows(vt.data(), hd, T);  // (hd, Tp)
    for (int r0 = 0; r0 < T; r0 += kRows) {
      const int R = std::min(kRows, T - r0);
      kernels::quantize_activations(&qh[size_t(r0) * hdp], R, hdp, qa, pool);
      // matmul writes (R, T) densely; the softmax spreads rows to Tp (zero tail).
      kernels::matmul(kw, qa, dense.data(), pool);
      pool.parallel_for(R, 16, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
          float* p = &scores[size_t(i) * Tp];
          std::copy_n(&dense[size_t(i) * T], T, p);
          softmax_row(p, T);
        }
      });
      kernels::quantize_activations(scores.data(), R, Tp, qa, pool);
      kernels::matmul(vw, qa, oh.data(), pool);
      for (int t = 0; t < R; ++t)
        std::copy_n(&oh[size_t(t) * hd], hd, out + size_t(r0 + t) * D + h * hd);
    }
  }
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
  const Impl& m = *impl_;
  const VisionConfig& c = m.c;
  if (tile.size != c.image_size || tile.pixels.size() != size_t(c.image_size) * c.image_size * 3)
    throw InvalidArgument("tile size does not match the encoder's image_size");
  const int N = c.n_patches(), D = c.d_model, F = c.d_ff, side = c.patches_per_side();
  const int T = c.n_positions(), first = T - N;  // first: 1 with a class token (row 0)

  // [class token] + patch embedding, + positions: x (T, D); CLIP's pre-LN.
  Floats patches(size_t(N) * m.patch.n_in);
  detail::extract_patches(tile.pixels.data(), c.image_size, c.patch_size, m.patch.n_in,
                          patches.data());
  Floats x(size_t(T) * D), xn(x.size()), q(x.size()), k(x.size()), v(x.size()), a(x.size());
  Floats f(size_t(T) * F);
  m.linear(m.patch, patches.data(), N, x.data() + size_t(first) * D, pool);
  std::copy(m.class_embd.begin(), m.class_embd.end(), x.begin());
  for (size_t i = 0; i < x.size(); ++i) x[i] += m.pos[i];
  if (c.has_pre_ln) {
    m.layer_norm(m.pre_ln, x.data(), xn.data(), T, pool);
    x.swap(xn);
  }

  for (const Layer& L : m.layers) {
    // x += o(attn(LN1(x)))
    m.layer_norm(L.ln1, x.data(), xn.data(), T, pool);
    m.qkv(L, xn.data(), T, q.data(), k.data(), v.data(), pool);
    m.attention(q.data(), k.data(), v.data(), a.data(), T, pool);
    m.linear(L.o, a.data(), T, q.data(), pool);
    for (size_t i = 0; i < x.size(); ++i) x[i] += q[i];
    // x += fc2(act(fc1(LN2(x))))
    m.layer_norm(L.ln2, x.data(), xn.data(), T, pool);
    m.linear(L.up, xn.data(), T, f.data(), pool);
    m.ffn_activation(f.data(), T, pool);
    m.linear(L.down, f.data(), T, q.data(), pool);
    for (size_t i = 0; i < x.size(); ++i) x[i] += q[i];
  }
  if (c.has_post_ln) {
    m.layer_norm(m.post_ln, x.data(), xn.data(), N, pool);
    x.swap(xn);
  }

  if (c.projector == ProjectorType::Mlp) {
    // Drop the class token; mm.2(GELU(mm.0(x))): (N, d_out).
    Floats h(size_t(N) * m.fc.w.n_out);
    m.linear(m.fc, x.data() + size_t(first) * D, N, h.data(), pool);
    pool.parallel_for(int64_t(h.size()), 4096, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) h[size_t(i)] = detail::gelu_erf(h[size_t(i)]);
    });
    Embeddings out{N, c.d_out, Floats(size_t(N) * c.d_out)};
    m.linear(m.fc2, h.data(), N, out.data.data(), pool);
    return out;
  }
  const int mg = c.merge, n_out = N / (mg * mg);
  Floats merged(size_t(N) * D);
  if (c.projector == ProjectorType::Idefics3) {
    detail::pixel_shuffle(x.data(), side, D, mg, merged.data());  // (T, D m^2)
  } else {
    detail::avg_pool(x.data(), side, D, mg, merged.data());  // (T, D)
    for (int t = 0; t < n_out; ++t)
      detail::rms_norm(&merged[size_t(t) * D], m.soft_norm.data(), D, c.ln_eps);
  }
  Embeddings out{n_out, c.d_out, Floats(size_t(n_out) * c.d_out)};
  m.linear(m.fc, merged.data(), n_out, out.data.data(), pool);
  return out;
}

Embeddings VisionEncoder::encode(const Image& img, TaskPool& pool) const {
  const PreprocessedImage pre = preprocess(img);
  Embeddings all{0, impl_->c.d_out, {}};
  for (const PixelTile& t : pre.tiles) {
    Embeddings e = encode_tile(t, pool);
    all.n_tokens += e.n_tokens;
    all.data.insert(all.data.end(), e.data.begin(), e.data.end());
  }
  return all;
}

}  // namespace tern::vision
