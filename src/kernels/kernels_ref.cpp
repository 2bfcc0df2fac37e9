// Scalar reference kernels: the oracle every fast kernel is tested against.
// Written for clarity, in the same block arithmetic the fast kernels use.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include "dispatch.h"
#include "tern/core/half.h"

namespace tern::kernels {
namespace {

// Per group of 32: d = amax/127, q = round_half_even(x * 127/amax),
// d and s = d*sum(q) kept in f32 (llama.cpp rounds both to fp16; with Q4_1 the
// min term m*s nearly cancels the scale term, so that rounding costs accuracy).
void quantize_rows_ref(const float* x, int r0, int r1, int n, QuantizedActs& qa) {
  const int groups = n / kGroup;
  for (int r = r0; r < r1; ++r) {
    for (int g = 0; g < groups; ++g) {
      const float* xg = x + size_t(r) * n + g * kGroup;
      int8_t* q = qa.q.data() + size_t(r) * n + g * kGroup;
      float amax = 0.0f;
      for (int j = 0; j < kGroup; ++j) amax = std::max(amax, std::fabs(xg[j]));
      const float d = amax / 127.0f;
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
      int sum = 0;
      for (int j = 0; j < kGroup; ++j) {
        const int v = int(std::nearbyint(xg[j] * id));
        q[j] = int8_t(v);
        sum += v;
      }
      qa.d[size_t(r) * groups + g] = d;
      qa.s[size_t(r) * groups + g] = d * float(sum);
      qa.isum[size_t(r) * groups + g] = sum;
    }
  }
}

// Per output: acc = sum over groups g, in order, of
//   fma(d_w*d_x, sumi, acc) then (int4, int5 asym) fma(m_w, s_x, acc),
//   (int5 sym, codes 0..31) fma(-16 d_w, s_x, acc)
// with sumi the exact integer dot product of the group (Nl4 / Fp4: of the
// codebook levels, as int8). The fast kernels keep
// one output per SIMD lane and walk the groups in the same order with the same
// fused multiply-adds, so their results are bit-identical to these.
// The float formats (F16, Bf16): per output, acc = fma(w[e], x[e], acc) over
// the inputs e in order, on the fp32 activations x.x. The fast kernels keep
// one output per lane and the same order (bit-identical in practice; their
// tests allow a tolerance).
void gemm_float_ref(const PackedMatrix& w, const QuantizedActs& x, float* y, int r0, int r1, int t0,
                    int t1) {
  assert(x.x != nullptr);
  const bool f16 = w.format == WeightFormat::F16;
  for (int r = r0; r < r1; ++r) {
    const float* xr = x.x + size_t(r) * w.n_in;
    for (int t = t0; t < t1; ++t) {
      const auto* blocks = reinterpret_cast<const FloatBlock*>(w.tile(t));
      for (int i = 0; i < kTileRows && t * kTileRows + i < w.n_out; ++i) {
        float acc = 0.0f;
        for (int e = 0; e < w.n_in; ++e) {
          const uint16_t h = blocks[e / kGroup].w[e % kGroup][i];
          acc = std::fma(f16 ? fp16_to_f32(h) : bf16_to_f32(h), xr[e], acc);
        }
        y[size_t(r) * w.n_out + t * kTileRows + i] = acc;
      }
    }
  }
}

void gemm_tiles_ref(const PackedMatrix& w, const QuantizedActs& x, float* y, int r0, int r1, int t0,
                    int t1) {
  if (is_float(w.format)) return gemm_float_ref(w, x, y, r0, r1, t0, t1);
  const int groups = w.n_groups();
  for (int r = r0; r < r1; ++r) {
    const int8_t* xq = x.q.data() + size_t(r) * w.n_in;
    const float* xd = x.d.data() + size_t(r) * groups;
    const float* xs = x.s.data() + size_t(r) * groups;
    for (int t = t0; t < t1; ++t) {
      const uint8_t* tile = w.tile(t);
      for (int i = 0; i < kTileRows; ++i) {
        const int o = t * kTileRows + i;
        if (o >= w.n_out) break;
        float acc = 0.0f;
        for (int g = 0; g < groups; ++g) {
          const int8_t* a = xq + g * kGroup;
          int sumi = 0;
          if (is_codebook(w.format)) {
            const auto& b = reinterpret_cast<const Code4Block*>(tile)[g];
            const int8_t* cb = codebook_of(w.format);
            for (int k = 0; k < kGroup; ++k) sumi += cb[code4_index(b, i, k)] * a[k];
            acc = std::fma(fp16_to_f32(b.d[i]) * xd[g], float(sumi), acc);
          } else if (is_int5(w.format)) {
            const uint8_t* blk = tile + size_t(g) * w.block_bytes();
            const auto& b = *reinterpret_cast<const Int5Block*>(blk);
            for (int k = 0; k < kGroup; ++k) sumi += int5_code(b, i, k) * a[k];
            const float d = fp16_to_f32(b.d[i]);
            const float m = w.format == WeightFormat::Int5Asym
                                ? fp16_to_f32(reinterpret_cast<const Int5AsymBlock*>(blk)->m[i])
                                : -16.0f * d;
            acc = std::fma(d * xd[g], float(sumi), acc);
            acc = std::fma(m, xs[g], acc);
          } else if (w.format == WeightFormat::Int4Asym) {
            const auto& b = reinterpret_cast<const Int4Block*>(tile)[g];
            for (int k = 0; k < kGroup; ++k) sumi += int4_code(b, i, k) * a[k];
            acc = std::fma(fp16_to_f32(b.d[i]) * xd[g], float(sumi), acc);
            acc = std::fma(fp16_to_f32(b.m[i]), xs[g], acc);
          } else {
            const auto& b = reinterpret_cast<const Int8Block*>(tile)[g];
            for (int k = 0; k < kGroup; ++k) sumi += int8_value(b, i, k) * a[k];
            acc = std::fma(fp16_to_f32(b.d[i]) * xd[g], float(sumi), acc);
          }
        }
        y[size_t(r) * w.n_out + o] = acc;
      }
    }
  }
}

void rmsnorm_ref(const float* x, const float* weight, float* out, int n, float eps) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += double(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(float(sum / n) + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void swiglu_ref(const float* gate, const float* up, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// The textbook tanh form (as ggml and PyTorch's approximate="tanh" write it).
void geglu_ref(const float* gate, const float* up, float* out, int n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int i = 0; i < n; ++i) {
    const float x = gate[i];
    const float gelu = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
    out[i] = gelu * up[i];
  }
}

// One query against positions [0, n_kv): the textbook online softmax.
void attend_one(const float* q, const uint16_t* k, const uint16_t* v, int n_kv, int head_dim,
                int64_t stride, float* out) {
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  for (int j = 0; j < head_dim; ++j) out[j] = 0.0f;
  for (int t = 0; t < n_kv; ++t) {
    const uint16_t* kt = k + t * stride;
    const uint16_t* vt = v + t * stride;
    float s = 0.0f;
    for (int j = 0; j < head_dim; ++j) s += q[j] * fp16_to_f32(kt[j]);
    const float m_new = std::max(m, s);
    const float corr = std::exp(m - m_new);  // 0 on the first step
    const float p = std::exp(s - m_new);
    l = l * corr + p;
    for (int j = 0; j < head_dim; ++j) out[j] = out[j] * corr + p * fp16_to_f32(vt[j]);
    m = m_new;
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int j = 0; j < head_dim; ++j) out[j] *= inv;
}

void attention_f16_ref(const float* q, float* out, int64_t q_stride, int n_tok, int n_grp,
                       int n_kv0, const uint16_t* k, const uint16_t* v, int64_t kv_stride,
                       int head_dim) {
  for (int i = 0; i < n_tok; ++i) {
    for (int g = 0; g < n_grp; ++g) {
      const int64_t o = i * q_stride + g * head_dim;
      attend_one(q + o, k, v, n_kv0 + i, head_dim, kv_stride, out + o);
    }
  }
}

}  // namespace

const KernelTable& scalar_kernels() {
  static const KernelTable t{.isa = "scalar",
                             .quantize_rows = quantize_rows_ref,
                             .gemm_tiles = gemm_tiles_ref,
                             .rmsnorm = rmsnorm_ref,
                             .swiglu = swiglu_ref,
                             .geglu = geglu_ref,
                             .attention_f16 = attention_f16_ref};
  return t;
}

}  // namespace tern::kernels
