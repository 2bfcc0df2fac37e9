// NEON (Armv8.0) kernels other than the matrix products: activation
// quantization, RMSNorm, SwiGLU, GeGLU and attention with an online softmax,
// shared by the neon, neon-dotprod and neon-i8mm tables. Each has a scalar twin
// in kernels_ref.cpp; quantize_rows is bit-identical to its twin, rmsnorm to
// within the order of a double-precision sum, the exp-based ones to a few ulp
// (the same bounds the AVX2 kernels meet; ops_test.cpp).
#include "ops_neon.h"

#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention_batches.h"
#include "dispatch.h"
#include "neon_simd.h"

namespace tern::kernels::neon {

// Per group of 32 (see quantize_rows_ref): d = amax/127, q = x*(127/amax)
// rounded half to even (fcvtns, as nearbyint in the default rounding mode),
// s = d*sum(q).
void quantize_rows(const float* x, int r0, int r1, int n, QuantizedActs& qa) {
  const int groups = n / kGroup;
  for (int r = r0; r < r1; ++r) {
    for (int g = 0; g < groups; ++g) {
      const float* xg = x + size_t(r) * n + g * kGroup;
      float32x4_t v[8];
      for (int i = 0; i < 8; ++i) v[i] = vld1q_f32(xg + 4 * i);
      float32x4_t a = vabsq_f32(v[0]);
      for (int i = 1; i < 8; ++i) a = vmaxq_f32(a, vabsq_f32(v[i]));
      const float amax = vmaxvq_f32(a);
      const float d = amax / 127.0f;
      const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
      int32x4_t q[8];
      for (int i = 0; i < 8; ++i) q[i] = vcvtnq_s32_f32(vmulq_n_f32(v[i], id));
      const int32x4_t sum4 = vaddq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])),
                                       vaddq_s32(vaddq_s32(q[4], q[5]), vaddq_s32(q[6], q[7])));
      const int sum = vaddvq_s32(sum4);
      // |q| <= 127: plain narrowing is exact.
      int8_t* dst = qa.q.data() + size_t(r) * n + g * kGroup;
      for (int h = 0; h < 2; ++h) {
        const int32x4_t* qh = q + 4 * h;
        const int16x8_t a16 = vcombine_s16(vmovn_s32(qh[0]), vmovn_s32(qh[1]));
        const int16x8_t b16 = vcombine_s16(vmovn_s32(qh[2]), vmovn_s32(qh[3]));
        vst1q_s8(dst + 16 * h, vcombine_s8(vmovn_s16(a16), vmovn_s16(b16)));
      }
      qa.d[size_t(r) * groups + g] = d;
      qa.s[size_t(r) * groups + g] = d * float(sum);
      qa.isum[size_t(r) * groups + g] = sum;
    }
  }
}

void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) {
  float64x2_t s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    const float32x4_t sq = vmulq_f32(v, v);  // squared in fp32, summed in fp64 (as the reference)
    s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(sq)));
    s1 = vaddq_f64(s1, vcvt_high_f64_f32(sq));
  }
  double sum = vaddvq_f64(vaddq_f64(s0, s1));
  for (int j = i; j < n; ++j) sum += double(x[j] * x[j]);
  const float scale = 1.0f / std::sqrt(float(sum / n) + eps);
  for (i = 0; i + 4 <= n; i += 4) {
    const float32x4_t v = vmulq_n_f32(vld1q_f32(x + i), scale);
    vst1q_f32(out + i, vmulq_f32(v, vld1q_f32(weight + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void swiglu(const float* gate, const float* up, float* out, int n) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t g = vld1q_f32(gate + i);
    const float32x4_t silu = vdivq_f32(g, vaddq_f32(one, neon::exp(vnegq_f32(g))));
    vst1q_f32(out + i, vmulq_f32(silu, vld1q_f32(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)), so gelu_tanh(x) = x / (1 + e^(-2u))
// with u = sqrt(2/pi) (x + 0.044715 x^3): one exp and a division, as silu.
void geglu(const float* gate, const float* up, float* out, int n) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  constexpr float kM2k = -2.0f * 0.7978845608028654f;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t g = vld1q_f32(gate + i);
    const float32x4_t inner = vfmaq_f32(one, vmulq_n_f32(g, 0.044715f), g);  // 1 + 0.044715 x^2
    const float32x4_t e = neon::exp(vmulq_f32(vmulq_n_f32(g, kM2k), inner));
    const float32x4_t gelu = vdivq_f32(g, vaddq_f32(one, e));
    vst1q_f32(out + i, vmulq_f32(gelu, vld1q_f32(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    const float e = std::exp(kM2k * g * std::fma(0.044715f * g, g, 1.0f));
    out[i] = g / (1.0f + e) * up[i];
  }
}

namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kMaxQueries = 32;  // queries processed together (their state lives on the stack)
constexpr int kChunk = 32;       // keys converted together; softmax state moves once a chunk
constexpr int kSlab = 8;         // output vectors (32 floats) kept in registers by pv

// acc (4*CN) = acc * corr + sum over j < nk of p[j] * v_j (4*CN fp32 at v + j*ld),
// with the CN accumulators in registers.
template <int CN>
inline void pv_slab(float* acc, float corr, const float* p, const float* v, int nk, int ld) {
  float32x4_t o[CN];
  for (int c = 0; c < CN; ++c) o[c] = vld1q_f32(acc + 4 * c);
  if (corr != 1.0f) {
    for (int c = 0; c < CN; ++c) o[c] = vmulq_n_f32(o[c], corr);
  }
  for (int j = 0; j < nk; ++j) {
    for (int c = 0; c < CN; ++c) o[c] = vfmaq_n_f32(o[c], vld1q_f32(v + j * ld + 4 * c), p[j]);
  }
  for (int c = 0; c < CN; ++c) vst1q_f32(acc + 4 * c, o[c]);
}

template <int N, class F>
inline void with_count(int n, F&& f) {
  if constexpr (N > 1) {
    if (n == N) return f(std::integral_constant<int, N>{});
    return with_count<N - 1>(n, f);
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

// nc = head_dim / 4 vectors a row.
void pv(float* acc, float corr, const float* p, const float* v, int nk, int nc) {
  for (int c0 = 0; c0 < nc; c0 += kSlab) {
    with_count<kSlab>(std::min(kSlab, nc - c0), [&](auto cn) {
      pv_slab<decltype(cn)::value>(acc + 4 * c0, corr, p, v + 4 * c0, nk, 4 * nc);
    });
  }
}

// Scores of one query against 4 consecutive keys (fp32 rows of 4*nc at k):
// lane j = q . k_j.
inline float32x4_t scores4(const float* q, const float* k, int nc) {
  float32x4_t part[4];
  for (int j = 0; j < 4; ++j) part[j] = vdupq_n_f32(0.0f);
  for (int c = 0; c < nc; ++c) {
    const float32x4_t qc = vld1q_f32(q + 4 * c);
    for (int j = 0; j < 4; ++j) part[j] = vfmaq_f32(part[j], qc, vld1q_f32(k + j * 4 * nc + 4 * c));
  }
  return vpaddq_f32(vpaddq_f32(part[0], part[1]), vpaddq_f32(part[2], part[3]));
}

// Rows [t0, t0+n) of an fp16 cache (row t at src + t*stride) -> dst (n rounded
// up to 4, 4*nc) fp32; the padding rows are zeroed (their scores are masked).
void convert_rows(const uint16_t* src, int64_t stride, int t0, int n, int nc, float* dst) {
  const int padded = (n + 3) / 4 * 4;
  for (int j = 0; j < padded; ++j) {
    float* d = dst + j * 4 * nc;
    if (j < n) {
      const uint16_t* s = src + (t0 + j) * stride;
      for (int c = 0; c < nc; ++c) vst1q_f32(d + 4 * c, load_f16x4(s + 4 * c));
    } else {
      for (int c = 0; c < nc; ++c) vst1q_f32(d + 4 * c, vdupq_n_f32(0.0f));
    }
  }
}

// Up to kMaxQueries queries (pointers qs[i], outputs os[i], each seeing n_kv[i]
// keys) against one KV head.
void attend_queries(const float* const* qs, float* const* os, const int* n_kv, int n_q,
                    const uint16_t* k, const uint16_t* v, int64_t kv_stride, int head_dim) {
  const int nc = head_dim / 4;
  alignas(16) float kf[kChunk * kMaxHeadDim], vf[kChunk * kMaxHeadDim];
  alignas(16) float acc[kMaxQueries * kMaxHeadDim];
  float m[kMaxQueries], l[kMaxQueries];
  int max_kv = 0;
  for (int i = 0; i < n_q; ++i) {
    m[i] = -std::numeric_limits<float>::infinity();
    l[i] = 0.0f;
    std::fill(acc + i * head_dim, acc + (i + 1) * head_dim, 0.0f);
    max_kv = std::max(max_kv, n_kv[i]);
  }
  const float32x4_t neg_inf = vdupq_n_f32(-std::numeric_limits<float>::infinity());
  const int32x4_t lane = {0, 1, 2, 3};
  for (int t0 = 0; t0 < max_kv; t0 += kChunk) {
    const int nk = std::min(kChunk, max_kv - t0);
    // The chunk's keys and values as fp32, once for all queries.
    convert_rows(k, kv_stride, t0, nk, nc, kf);
    convert_rows(v, kv_stride, t0, nk, nc, vf);
    for (int i = 0; i < n_q; ++i) {
      const int nki = std::min(nk, n_kv[i] - t0);  // this query's keys in the chunk
      if (nki <= 0) continue;
      const int nb = (nki + 3) / 4;
      // s: q . k_j for the chunk's keys, -inf past this query's last one.
      float32x4_t s[kChunk / 4];
      float32x4_t mx = neg_inf;
      for (int b = 0; b < nb; ++b) {
        const uint32x4_t valid = vcgtq_s32(vdupq_n_s32(nki - 4 * b), lane);
        s[b] = vbslq_f32(valid, scores4(qs[i], kf + b * 4 * head_dim, nc), neg_inf);
        mx = vmaxq_f32(mx, s[b]);
      }
      // Online softmax: the running sum and output are rescaled only when the max moves.
      const float m_new = std::max(m[i], hmax(mx));
      const float corr = m_new == m[i] ? 1.0f : std::exp(m[i] - m_new);  // 0 on the first chunk
      const float32x4_t vm = vdupq_n_f32(m_new);
      alignas(16) float p[kChunk];
      float32x4_t psum = vdupq_n_f32(0.0f);
      for (int b = 0; b < nb; ++b) {
        const float32x4_t pb = neon::exp(vsubq_f32(s[b], vm));  // 0 past the end
        psum = vaddq_f32(psum, pb);
        vst1q_f32(p + 4 * b, pb);
      }
      l[i] = l[i] * corr + hsum(psum);
      m[i] = m_new;
      pv(acc + i * head_dim, corr, p, vf, nki, nc);
    }
  }
  for (int i = 0; i < n_q; ++i) {
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    for (int c = 0; c < nc; ++c)
      vst1q_f32(os[i] + 4 * c, vmulq_n_f32(vld1q_f32(acc + i * head_dim + 4 * c), inv));
  }
}

}  // namespace

// As the AVX2 kernel (ops_avx2.cpp) on 4-lane vectors: chunks of 32 keys, each
// chunk's K and V rows converted to fp32 once (fcvtl) and shared by all the
// queries of the call (the GQA heads of a token and the tokens of a prefill
// block); scores 4 keys at a time (one pairwise-add reduction each), the
// running max and sum moved once a chunk, the output accumulated in registers.
void attention_f16(const float* q, float* out, int64_t q_stride, int n_tok, int n_grp, int n_kv0,
                   const uint16_t* k, const uint16_t* v, int64_t kv_stride, int head_dim) {
  if (head_dim % 4 != 0 || head_dim > kMaxHeadDim || n_grp > kMaxQueries) {
    scalar_kernels().attention_f16(q, out, q_stride, n_tok, n_grp, n_kv0, k, v, kv_stride,
                                   head_dim);
    return;
  }
  for_query_batches<kMaxQueries>(
      q, out, q_stride, n_tok, n_grp, n_kv0, head_dim,
      [&](const float* const* qs, float* const* os, const int* n_kv, int n_q) {
        attend_queries(qs, os, n_kv, n_q, k, v, kv_stride, head_dim);
      });
}

KernelTable table(const char* isa, GemmTilesFn gemm_tiles) {
  return KernelTable{.isa = isa,
                     .quantize_rows = quantize_rows,
                     .gemm_tiles = gemm_tiles,
                     .rmsnorm = rmsnorm,
                     .swiglu = swiglu,
                     .geglu = geglu,
                     .attention_f16 = attention_f16};
}

}  // namespace tern::kernels::neon
