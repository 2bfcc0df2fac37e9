// AVX2 + FMA + F16C kernels other than the matrix products: activation
// quantization, RMSNorm, SwiGLU, GeGLU and single-query attention with an online
// softmax. Each has a scalar twin in kernels_ref.cpp; quantize_rows is
// bit-identical to its twin, rmsnorm to within the order of a
// double-precision sum, the exp-based ones to a few ulp.
#include "ops_avx2.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention_batches.h"
#include "dispatch.h"
#include "x86_simd.h"

namespace tern::kernels::avx2 {

using namespace x86;

// Per group of 32 (see quantize_rows_ref): d = amax/127, q = x*(127/amax)
// rounded half to even (vcvtps2dq under the default rounding mode, as
// nearbyint), d and s = d*sum(q) rounded to fp16.
void quantize_rows(const float* x, int r0, int r1, int n, QuantizedActs& qa) {
  const int groups = n / kGroup;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int r = r0; r < r1; ++r) {
    for (int g = 0; g < groups; ++g) {
      const float* xg = x + size_t(r) * n + g * kGroup;
      const __m256 v0 = _mm256_loadu_ps(xg), v1 = _mm256_loadu_ps(xg + 8);
      const __m256 v2 = _mm256_loadu_ps(xg + 16), v3 = _mm256_loadu_ps(xg + 24);
      const __m256 a =
          _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                        _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
      const float amax = hmax(a);
      const float d = amax / 127.0f;
      const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
      const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id));
      const __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
      const __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id));
      const __m256i q3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
      const int sum =
          hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
      // int32 -> int8: the packs interleave 128-bit lanes; the permute undoes it.
      const __m256i q16a = _mm256_packs_epi32(q0, q1), q16b = _mm256_packs_epi32(q2, q3);
      const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b), order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qa.q.data() + size_t(r) * n + g * kGroup), q8);
      qa.d[size_t(r) * groups + g] = d;
      qa.s[size_t(r) * groups + g] = d * float(sum);
      qa.isum[size_t(r) * groups + g] = sum;
    }
  }
}

void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);  // squared in fp32, summed in fp64 (as the reference)
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  alignas(32) double part[4];
  _mm256_store_pd(part, _mm256_add_pd(s0, s1));
  double sum = (part[0] + part[1]) + (part[2] + part[3]);
  for (int j = i; j < n; ++j) sum += double(x[j] * x[j]);
  const float scale = 1.0f / std::sqrt(float(sum / n) + eps);
  const __m256 vs = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(v, _mm256_loadu_ps(weight + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void swiglu(const float* gate, const float* up, float* out, int n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = x86::exp(_mm256_xor_ps(g, sign));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)), so gelu_tanh(x) = x / (1 + e^(-2u))
// with u = sqrt(2/pi) (x + 0.044715 x^3): one exp and a division, as silu.
void geglu(const float* gate, const float* up, float* out, int n) {
  const __m256 one = _mm256_set1_ps(1.0f), c = _mm256_set1_ps(0.044715f);
  const __m256 m2k = _mm256_set1_ps(-2.0f * 0.7978845608028654f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(c, g), g, one);  // 1 + 0.044715 x^2
    const __m256 e = x86::exp(_mm256_mul_ps(_mm256_mul_ps(m2k, g), inner));
    const __m256 gelu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    const float e = std::exp(-2.0f * 0.7978845608028654f * g * std::fma(0.044715f * g, g, 1.0f));
    out[i] = g / (1.0f + e) * up[i];
  }
}

namespace {

// Sums each of 8 vectors: lane j of the result = hsum(v[j]).
inline __m256 hsum8(const __m256* v) {
  const __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  // a = [s0 s1 s2 s3 | s0 s1 s2 s3] halves, b likewise for s4..s7.
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

constexpr int kMaxHeadDim = 256;
constexpr int kMaxQueries = 32;  // queries processed together (their state lives on the stack)
constexpr int kChunk = 32;       // keys converted together; softmax state moves once a chunk

// acc (8*CN) = acc * corr + sum over j < nk of p[j] * v_j (8*CN fp32 at v + j*ld),
// with the CN accumulators in registers.
template <int CN>
inline void pv_slab(float* acc, float corr, const float* p, const float* v, int nk, int ld) {
  __m256 o[CN];
  for (int c = 0; c < CN; ++c) o[c] = _mm256_load_ps(acc + 8 * c);
  if (corr != 1.0f) {
    const __m256 vc = _mm256_set1_ps(corr);
    for (int c = 0; c < CN; ++c) o[c] = _mm256_mul_ps(o[c], vc);
  }
  int j = 0;
  for (; j + 2 <= nk; j += 2) {
    const __m256 p0 = _mm256_set1_ps(p[j]), p1 = _mm256_set1_ps(p[j + 1]);
    for (int c = 0; c < CN; ++c) {
      const __m256 t = _mm256_mul_ps(p0, _mm256_load_ps(v + j * ld + 8 * c));
      o[c] = _mm256_add_ps(o[c], _mm256_fmadd_ps(p1, _mm256_load_ps(v + (j + 1) * ld + 8 * c), t));
    }
  }
  for (; j < nk; ++j) {
    const __m256 pb = _mm256_set1_ps(p[j]);
    for (int c = 0; c < CN; ++c)
      o[c] = _mm256_fmadd_ps(pb, _mm256_load_ps(v + j * ld + 8 * c), o[c]);
  }
  for (int c = 0; c < CN; ++c) _mm256_store_ps(acc + 8 * c, o[c]);
}

void pv(float* acc, float corr, const float* p, const float* v, int nk, int nc) {
  for (int c0 = 0; c0 < nc; c0 += 8) {
    float* a = acc + 8 * c0;
    const float* vb = v + 8 * c0;
    const int ld = 8 * nc;
    switch (std::min(8, nc - c0)) {
      case 8:
        pv_slab<8>(a, corr, p, vb, nk, ld);
        break;
      case 7:
        pv_slab<7>(a, corr, p, vb, nk, ld);
        break;
      case 6:
        pv_slab<6>(a, corr, p, vb, nk, ld);
        break;
      case 5:
        pv_slab<5>(a, corr, p, vb, nk, ld);
        break;
      case 4:
        pv_slab<4>(a, corr, p, vb, nk, ld);
        break;
      case 3:
        pv_slab<3>(a, corr, p, vb, nk, ld);
        break;
      case 2:
        pv_slab<2>(a, corr, p, vb, nk, ld);
        break;
      default:
        pv_slab<1>(a, corr, p, vb, nk, ld);
        break;
    }
  }
}

// Scores of one query against 8 consecutive keys (fp32 rows of 8*nc at k).
inline __m256 scores8(const float* q, const float* k, int nc) {
  __m256 part[8];
  for (int j = 0; j < 8; ++j) part[j] = _mm256_setzero_ps();
  for (int c = 0; c < nc; ++c) {
    const __m256 qc = _mm256_loadu_ps(q + 8 * c);
    for (int j = 0; j < 8; ++j)
      part[j] = _mm256_fmadd_ps(qc, _mm256_load_ps(k + j * 8 * nc + 8 * c), part[j]);
  }
  return hsum8(part);
}

// Rows [t0, t0+n) of an fp16 cache (row t at src + t*stride) -> dst (n rounded
// up to 8, 8*nc) fp32; the padding rows are zeroed (their scores are masked).
void convert_rows(const uint16_t* src, int64_t stride, int t0, int n, int nc, float* dst) {
  const int padded = (n + 7) / 8 * 8;
  for (int j = 0; j < padded; ++j) {
    float* d = dst + j * 8 * nc;
    if (j < n) {
      const uint16_t* s = src + (t0 + j) * stride;
      for (int c = 0; c < nc; ++c) _mm256_store_ps(d + 8 * c, load_f16(s + 8 * c));
    } else {
      for (int c = 0; c < nc; ++c) _mm256_store_ps(d + 8 * c, _mm256_setzero_ps());
    }
  }
}

// Up to kMaxQueries queries (pointers qs[i], outputs os[i], each seeing n_kv[i]
// keys) against one KV head.
void attend_queries(const float* const* qs, float* const* os, const int* n_kv, int n_q,
                    const uint16_t* k, const uint16_t* v, int64_t kv_stride, int head_dim) {
  const int nc = head_dim / 8;
  alignas(32) float kf[kChunk * kMaxHeadDim], vf[kChunk * kMaxHeadDim];
  alignas(32) float acc[kMaxQueries * kMaxHeadDim];
  float m[kMaxQueries], l[kMaxQueries];
  int max_kv = 0;
  for (int i = 0; i < n_q; ++i) {
    m[i] = -std::numeric_limits<float>::infinity();
    l[i] = 0.0f;
    for (int c = 0; c < nc; ++c) _mm256_store_ps(acc + i * head_dim + 8 * c, _mm256_setzero_ps());
    max_kv = std::max(max_kv, n_kv[i]);
  }
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int t0 = 0; t0 < max_kv; t0 += kChunk) {
    const int nk = std::min(kChunk, max_kv - t0);
    // The chunk's keys and values as fp32, once for all queries.
    convert_rows(k, kv_stride, t0, nk, nc, kf);
    convert_rows(v, kv_stride, t0, nk, nc, vf);
    for (int i = 0; i < n_q; ++i) {
      const int nki = std::min(nk, n_kv[i] - t0);  // this query's keys in the chunk
      if (nki <= 0) continue;
      const int nb = (nki + 7) / 8;
      // s: q . k_j for the chunk's keys, -inf past this query's last one.
      __m256 s[kChunk / 8];
      __m256 mx = neg_inf;
      for (int b = 0; b < nb; ++b) {
        s[b] = scores8(qs[i], kf + b * 8 * head_dim, nc);
        const __m256 valid =
            _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nki - 8 * b), lane));
        s[b] = _mm256_blendv_ps(neg_inf, s[b], valid);
        mx = _mm256_max_ps(mx, s[b]);
      }
      // Online softmax: the running sum and output are rescaled only when the max moves.
      const float m_new = std::max(m[i], hmax(mx));
      const float corr = m_new == m[i] ? 1.0f : std::exp(m[i] - m_new);  // 0 on the first chunk
      const __m256 vm = _mm256_set1_ps(m_new);
      alignas(32) float p[kChunk];
      __m256 psum = _mm256_setzero_ps();
      for (int b = 0; b < nb; ++b) {
        const __m256 pb = x86::exp(_mm256_sub_ps(s[b], vm));  // 0 past the end
        psum = _mm256_add_ps(psum, pb);
        _mm256_store_ps(p + 8 * b, pb);
      }
      l[i] = l[i] * corr + hsum(psum);
      m[i] = m_new;
      pv(acc + i * head_dim, corr, p, vf, nki, nc);
    }
  }
  for (int i = 0; i < n_q; ++i) {
    const __m256 inv = _mm256_set1_ps(l[i] > 0.0f ? 1.0f / l[i] : 0.0f);
    for (int c = 0; c < nc; ++c) {
      _mm256_storeu_ps(os[i] + 8 * c,
                       _mm256_mul_ps(_mm256_load_ps(acc + i * head_dim + 8 * c), inv));
    }
  }
}

}  // namespace

// Chunks of 32 keys: each chunk's K and V rows are converted to fp32 once and
// shared by all queries of the call (the GQA heads of a token, and the tokens
// of a prefill block). For each query the scores come 8 keys at a time (one
// transposing reduction each), the running max and sum move once a chunk, and
// the output accumulates in registers across the chunk's keys.
void attention_f16(const float* q, float* out, int64_t q_stride, int n_tok, int n_grp, int n_kv0,
                   const uint16_t* k, const uint16_t* v, int64_t kv_stride, int head_dim) {
  if (head_dim % 8 != 0 || head_dim > kMaxHeadDim || n_grp > kMaxQueries) {
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

}  // namespace tern::kernels::avx2
