// Shared fast block pieces (vit_ops.h). Compiled with -fno-trapping-math for
// the softmax's exp (see CMakeLists.txt).
#include "vit_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "tern/core/task_pool.h"
#include "vit_common.h"

namespace tern::vision::detail {
namespace {

int round_up(int n, int to) {
  return (n + to - 1) / to * to;
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

// y (T, n_out) += b (n_out)
void add_bias(const Floats& b, float* y, int T, TaskPool& pool) {
  const int n_out = int(b.size());
  pool.parallel_for(T, 64, [&](int64_t lo, int64_t hi, int) {
    for (int64_t t = lo; t < hi; ++t)
      for (int o = 0; o < n_out; ++o) y[t * n_out + o] += b[size_t(o)];
  });
}

// A GGUF matrix [n_in, n_out] (or conv kernel [.., n_out]) as a packed
// (n_out, n_in) weight. Sources whose rows fit the group are repacked
// directly (Q8_0 exactly).
kernels::PackedMatrix pack_tensor(Tensor t) {
  const int n_out = int(t->dims.back());
  const int n_in = int(t->n_elements() / n_out);
  if (n_in % kernels::kGroup == 0)
    return kernels::pack_matrix(t->type, t->data, n_out, n_in, kernels::WeightFormat::Int8Sym);
  const Floats f = to_floats(t);
  return pack_rows(f.data(), n_out, n_in);
}

}  // namespace

kernels::PackedMatrix pack_rows(const float* x, int n_out, int n_in) {
  const int padded = round_up(n_in, kernels::kGroup);
  if (padded == n_in)
    return kernels::pack_matrix(DType::F32, x, n_out, n_in, kernels::WeightFormat::Int8Sym);
  Floats tmp(size_t(n_out) * padded, 0.0f);
  for (int r = 0; r < n_out; ++r) std::copy_n(x + size_t(r) * n_in, n_in, &tmp[size_t(r) * padded]);
  return kernels::pack_matrix(DType::F32, tmp.data(), n_out, padded,
                              kernels::WeightFormat::Int8Sym);
}

Linear make_linear(Tensor w, Tensor b) {
  Linear l{pack_tensor(w), {}, 0};
  l.b = b ? to_floats(b) : Floats(size_t(l.w.n_out), 0.0f);
  l.n_in = int(w->n_elements() / w->dims.back());
  return l;
}

void linear(const Linear& l, const float* x, int T, float* y, TaskPool& pool) {
  // x rows are l.n_in wide; padded to l.w.n_in when that differs.
  Floats padded;
  if (l.n_in != l.w.n_in) {
    padded.assign(size_t(T) * l.w.n_in, 0.0f);
    for (int t = 0; t < T; ++t)
      std::copy_n(x + size_t(t) * l.n_in, l.n_in, &padded[size_t(t) * l.w.n_in]);
    x = padded.data();
  }
  kernels::QuantizedActs qa;
  kernels::quantize_activations(x, T, l.w.n_in, qa, pool);
  kernels::matmul(l.w, qa, y, pool);
  add_bias(l.b, y, T, pool);
}

Norm make_norm(Tensor w, Tensor b) {
  return {to_floats(w), to_floats(b)};
}

void layer_norm(const Norm& n, float eps, const float* x, float* y, int T, TaskPool& pool) {
  const int D = int(n.w.size());
  pool.parallel_for(T, 32, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) {
      const float* r = x + t * D;
      float* o = y + t * D;
      float mean = 0;
      for (int i = 0; i < D; ++i) mean += r[i];
      mean /= float(D);
      float var = 0;
      for (int i = 0; i < D; ++i) var += (r[i] - mean) * (r[i] - mean);
      const float inv = 1.0f / std::sqrt(var / float(D) + eps);
      for (int i = 0; i < D; ++i) o[i] = (r[i] - mean) * inv * n.w[size_t(i)] + n.b[size_t(i)];
    }
  });
}

Block make_block(const VisionLayerWeights& L) {
  return Block{make_norm(L.ln1_w, L.ln1_b), make_norm(L.ln2_w, L.ln2_b),
               make_linear(L.q_w, L.q_b),   make_linear(L.k_w, L.k_b),
               make_linear(L.v_w, L.v_b),   make_linear(L.o_w, L.o_b),
               make_linear(L.up_w, L.up_b), make_linear(L.down_w, L.down_b)};
}

void qkv(const Block& L, const float* xn, int T, float* q, float* k, float* v, TaskPool& pool) {
  kernels::QuantizedActs qa;
  kernels::quantize_activations(xn, T, L.q.w.n_in, qa, pool);
  kernels::matmul({{&L.q.w, q}, {&L.k.w, k}, {&L.v.w, v}}, qa, pool);
  add_bias(L.q.b, q, T, pool);
  add_bias(L.k.b, k, T, pool);
  add_bias(L.v.b, v, T, pool);
}

// Head h: S = (q_h / sqrt(hd)) K_h^T (int8), softmax in fp32, out_h = P V_h
// (int8, V_h^T packed as the weight). Query rows go in blocks of kRows so a
// block's scores (kRows, T) stay in L2 from the Q K^T product through the
// softmax to the P V product (the whole (T, T) matrix is 4 MB at T = 1024,
// and streaming it through memory five times a head cost as much as the
// GEMMs).
void attention_head(const float* q, const float* k, const float* v, float* out, int T, int D,
                    int hd, int h, AttnScratch& s, TaskPool& pool) {
  constexpr int kRows = 128;
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
  const kernels::PackedMatrix kw = pack_rows(s.kh.data(), T, hd);  // (T, hdp)
  const kernels::PackedMatrix vw = pack_rows(s.vt.data(), hd, T);  // (hd, Tp)
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

}  // namespace tern::vision::detail
