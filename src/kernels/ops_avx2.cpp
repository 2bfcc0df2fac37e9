// AVX2 + FMA + F16C kernels other than the matrix products: activation
// quantization, RMSNorm, SwiGLU, softmax, fp16 conversion and single-query
// attention with an online softmax. Each has a scalar twin in kernels_ref.cpp;
// quantize_rows and f32_to_f16 are bit-identical to theirs, rmsnorm to within
// the order of a double-precision sum, the exp-based ones to a few ulp.
#include "ops_avx2.h"

#include <algorithm>
#include <cmath>
#include <limits>

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
      const __m256 a = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                     _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
      const float amax = hmax(a);
      const float d = amax / 127.0f;
      const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
      const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id));
      const __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
      const __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id));
      const __m256i q3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
      const int sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
      // int32 -> int8: the packs interleave 128-bit lanes; the permute undoes it.
      const __m256i q16a = _mm256_packs_epi32(q0, q1), q16b = _mm256_packs_epi32(q2, q3);
      const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b), order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qa.q.data() + size_t(r) * n + g * kGroup), q8);
      qa.d[size_t(r) * groups + g] = d;
      qa.s[size_t(r) * groups + g] = d * float(sum);
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

void softmax(float* x, int n) {
  if (n <= 0) return;
  float mx = -std::numeric_limits<float>::infinity();
  int i = 0;
  if (n >= 8) {
    __m256 m = _mm256_loadu_ps(x);
    for (i = 8; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    mx = hmax(m);
  }
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = x86::exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double part[4];
  _mm256_store_pd(part, _mm256_add_pd(s0, s1));
  double sum = (part[0] + part[1]) + (part[2] + part[3]);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const __m256 inv = _mm256_set1_ps(float(1.0 / sum));
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  for (; i < n; ++i) x[i] *= float(1.0 / sum);
}

void f32_to_f16(const float* x, uint16_t* out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = uint16_t(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

namespace {

// Sums each of 8 vectors: lane j of the result = hsum(v[j]).
inline __m256 hsum8(const __m256* v) {
  const __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  // a = [s0 s1 s2 s3 | s0 s1 s2 s3] halves, b likewise for s4..s7.
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

constexpr int kMaxHeadDim = 512;

// acc (8*CN) = acc * corr + sum over j < nb of p[j] * v_j (8*CN fp16 at v + j*stride),
// with the CN accumulators in registers.
template <int CN>
inline void pv_slab(float* acc, float corr, const float* p, const uint16_t* v, int nb,
                    int64_t stride) {
  __m256 o[CN];
  const __m256 vc = _mm256_set1_ps(corr);
  for (int c = 0; c < CN; ++c) o[c] = _mm256_mul_ps(_mm256_load_ps(acc + 8 * c), vc);
  for (int j = 0; j < nb; ++j) {
    const uint16_t* vt = v + j * stride;
    const __m256 pb = _mm256_set1_ps(p[j]);
    for (int c = 0; c < CN; ++c) o[c] = _mm256_fmadd_ps(pb, load_f16(vt + 8 * c), o[c]);
  }
  for (int c = 0; c < CN; ++c) _mm256_store_ps(acc + 8 * c, o[c]);
}

}  // namespace

// Online softmax over blocks of 8 keys: the 8 scores are computed together
// (one transposing reduction for all 8), the running max and sum are updated
// once a block, and the accumulator is rescaled only when the max moves.
void attention_f16(const float* q, const uint16_t* k, const uint16_t* v, int n_kv, int head_dim,
                   int64_t stride, float* out) {
  if (head_dim % 8 != 0 || head_dim > kMaxHeadDim) {
    scalar_kernels().attention_f16(q, k, v, n_kv, head_dim, stride, out);
    return;
  }
  const int nc = head_dim / 8;
  alignas(32) float acc[kMaxHeadDim];
  for (int c = 0; c < nc; ++c) _mm256_store_ps(acc + 8 * c, _mm256_setzero_ps());
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
  for (int t0 = 0; t0 < n_kv; t0 += 8) {
    const int nb = std::min(8, n_kv - t0);
    // s (8): q . k_t for the block's keys; -inf past the end.
    __m256 part[8];
    for (int j = 0; j < 8; ++j) {
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
      if (j < nb) {
        const uint16_t* kt = k + (t0 + j) * stride;
        int c = 0;
        for (; c + 2 <= nc; c += 2) {
          a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8 * c), load_f16(kt + 8 * c), a0);
          a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8 * c + 8), load_f16(kt + 8 * c + 8), a1);
        }
        if (c < nc) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8 * c), load_f16(kt + 8 * c), a0);
      }
      part[j] = _mm256_add_ps(a0, a1);
    }
    __m256 s = hsum8(part);
    const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nb), lane));
    s = _mm256_blendv_ps(neg_inf, s, valid);
    const float m_new = std::max(m, hmax(s));
    const float corr = std::exp(m - m_new);  // 0 on the first block
    const __m256 p = x86::exp(_mm256_sub_ps(s, _mm256_set1_ps(m_new)));  // 0 past the end
    l = l * corr + hsum(p);
    alignas(32) float pj[8];
    _mm256_store_ps(pj, p);
    // acc = acc * corr + sum_j p_j v_j, one slab of up to 64 dims at a time in registers.
    for (int c0 = 0; c0 < nc; c0 += 8) {
      const uint16_t* vb = v + t0 * stride + 8 * c0;
      switch (std::min(8, nc - c0)) {
        case 8: pv_slab<8>(acc + 8 * c0, corr, pj, vb, nb, stride); break;
        case 7: pv_slab<7>(acc + 8 * c0, corr, pj, vb, nb, stride); break;
        case 6: pv_slab<6>(acc + 8 * c0, corr, pj, vb, nb, stride); break;
        case 5: pv_slab<5>(acc + 8 * c0, corr, pj, vb, nb, stride); break;
        case 4: pv_slab<4>(acc + 8 * c0, corr, pj, vb, nb, stride); break;
        case 3: pv_slab<3>(acc + 8 * c0, corr, pj, vb, nb, stride); break;
        case 2: pv_slab<2>(acc + 8 * c0, corr, pj, vb, nb, stride); break;
        default: pv_slab<1>(acc + 8 * c0, corr, pj, vb, nb, stride); break;
      }
    }
    m = m_new;
  }
  const __m256 inv = _mm256_set1_ps(l > 0.0f ? 1.0f / l : 0.0f);
  for (int c = 0; c < nc; ++c) _mm256_storeu_ps(out + 8 * c, _mm256_mul_ps(_mm256_load_ps(acc + 8 * c), inv));
}

}  // namespace tern::kernels::avx2
