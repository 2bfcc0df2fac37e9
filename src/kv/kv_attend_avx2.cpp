// AVX2 + FMA + F16C block-attention kernels. Built with TERN_AVX2_FLAGS and
// used only when kernels' dispatch point picked an AVX2-family table (see
// kv_attend.cpp). The exp polynomial and hsum come from kernels/x86_simd.h.
//
// Per block and query row: scores for all tokens, one block max, one rescale
// of (l, acc), exps vectorised, then acc += sum_t p_t v_t with 16 output dims
// per row held in registers while the block's value rows stream past.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tern/kernels/x86_simd.h"
#include "tern/kv/kv_attend.h"

namespace tern::kv {
namespace {

using kernels::x86::exp_neg;
using kernels::x86::hsum;

// 8 consecutive codes of a row, as floats (fp8 values come out / 256: the
// e4m3 bits shifted into fp16 position read as fp16 are the value * 2^-8).
inline __m256 load8_f16(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8_i8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
// e4m3 byte b -> fp16 bits: sign-extend to 16 bits and shift left by 7: bit 15
// gets the sign (a copy of it), bits 13..7 the exponent and mantissa; bit 14
// also got the sign and is cleared.
inline __m256 load8_fp8(const uint8_t* p) {
  const __m128i x = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_cvtph_ps(_mm_and_si128(_mm_slli_epi16(x, 7), _mm_set1_epi16(int16_t(0xbf80))));
}

// Key codes of 8 dims j..j+7 (int4: the low nibbles are dims j.., the high
// nibbles dims j+n/2..).
template <KvType T>
inline __m256 load8_v(const uint8_t* row, int j) {
  if constexpr (T == KvType::F16)
    return load8_f16(row + 2 * j);
  else if constexpr (T == KvType::Int8)
    return load8_i8(row + j);
  else
    return load8_fp8(row + j);
}
template <KvType T>
inline float load1_v(const uint8_t* row, int j) {
  if constexpr (T == KvType::F16)
    return _cvtsh_ss(uint16_t(row[2 * j] | (row[2 * j + 1] << 8)));
  else if constexpr (T == KvType::Int8)
    return float(int8_t(row[j]));
  else
    return fp8_decode(row[j]) * (1.0f / 256.0f);
}

// Scalar tails use explicit fma so that every instantiation rounds alike
// (whether the compiler contracts a*b+c may differ between them).
inline float int4_tail(float acc, const float* q, const uint8_t* k, int j, int half) {
  acc = std::fma(q[j], float(int(k[j] & 15) - 8), acc);
  return std::fma(q[j + half], float(int(k[j] >> 4) - 8), acc);
}

// NR query rows per block (the query heads of one GQA group for one token):
// each key and value row is decoded once for all of them, and per row every
// floating-point operation and its order are independent of NR, so one row
// alone and the same row among others give bit-identical results.

template <KvType T, int NR>
void key_dots(const uint8_t* k, int n, const float* const* q, float* out) {
  __m256 a0[NR], a1[NR];
  float tail[NR];
  for (int r = 0; r < NR; ++r)
    a0[r] = _mm256_setzero_ps(), a1[r] = _mm256_setzero_ps(), tail[r] = 0.0f;
  if constexpr (T == KvType::Int4Fp8) {
    const int half = n / 2;
    int j = 0;
    const __m256i lo_mask = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
    for (; j + 8 <= half; j += 8) {
      const __m256i b =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(k + j)));
      const __m256 lo = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(b, lo_mask), eight));
      const __m256 hi = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(b, 4), eight));
      for (int r = 0; r < NR; ++r) {
        a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q[r] + j), lo, a0[r]);
        a1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q[r] + j + half), hi, a1[r]);
      }
    }
    for (; j < half; ++j) {
      for (int r = 0; r < NR; ++r) tail[r] = int4_tail(tail[r], q[r], k, j, half);
    }
  } else {
    int j = 0;
    for (; j + 16 <= n; j += 16) {
      const __m256 k0 = load8_v<T>(k, j), k1 = load8_v<T>(k, j + 8);
      for (int r = 0; r < NR; ++r) {
        a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q[r] + j), k0, a0[r]);
        a1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q[r] + j + 8), k1, a1[r]);
      }
    }
    for (; j + 8 <= n; j += 8) {
      const __m256 k0 = load8_v<T>(k, j);
      for (int r = 0; r < NR; ++r) a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q[r] + j), k0, a0[r]);
    }
    for (; j < n; ++j) {
      for (int r = 0; r < NR; ++r) tail[r] = std::fma(q[r][j], load1_v<T>(k, j), tail[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r] = hsum(_mm256_add_ps(a0[r], a1[r])) + tail[r];
}

// For each row r: acc_r = acc_r * corr[r] + sum_t pv[r][t] v_t.
template <KvType VT, int NR>
void value_accumulate_rows(const uint8_t* v, size_t v_row, int n_tok, int n, const float (*pv)[264],
                           const float* corr, float* acc, int acc_stride) {
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    __m256 a0[NR], a1[NR];
    for (int r = 0; r < NR; ++r) {
      const __m256 c = _mm256_set1_ps(corr[r]);
      a0[r] = _mm256_mul_ps(_mm256_loadu_ps(acc + r * acc_stride + j), c);
      a1[r] = _mm256_mul_ps(_mm256_loadu_ps(acc + r * acc_stride + j + 8), c);
    }
    for (int t = 0; t < n_tok; ++t) {
      const uint8_t* row = v + size_t(t) * v_row;
      const __m256 v0 = load8_v<VT>(row, j), v1 = load8_v<VT>(row, j + 8);
      for (int r = 0; r < NR; ++r) {
        const __m256 p = _mm256_broadcast_ss(pv[r] + t);
        a0[r] = _mm256_fmadd_ps(p, v0, a0[r]);
        a1[r] = _mm256_fmadd_ps(p, v1, a1[r]);
      }
    }
    for (int r = 0; r < NR; ++r) {
      _mm256_storeu_ps(acc + r * acc_stride + j, a0[r]);
      _mm256_storeu_ps(acc + r * acc_stride + j + 8, a1[r]);
    }
  }
  for (; j + 8 <= n; j += 8) {
    __m256 a[NR];
    for (int r = 0; r < NR; ++r)
      a[r] = _mm256_mul_ps(_mm256_loadu_ps(acc + r * acc_stride + j), _mm256_set1_ps(corr[r]));
    for (int t = 0; t < n_tok; ++t) {
      const __m256 v0 = load8_v<VT>(v + size_t(t) * v_row, j);
      for (int r = 0; r < NR; ++r) a[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(pv[r] + t), v0, a[r]);
    }
    for (int r = 0; r < NR; ++r) _mm256_storeu_ps(acc + r * acc_stride + j, a[r]);
  }
  for (; j < n; ++j) {
    for (int r = 0; r < NR; ++r) {
      float a = acc[r * acc_stride + j] * corr[r];
      for (int t = 0; t < n_tok; ++t)
        a = std::fma(pv[r][t], load1_v<VT>(v + size_t(t) * v_row, j), a);
      acc[r * acc_stride + j] = a;
    }
  }
}

template <KvType T, int NR>
void attend_rows_fixed(const KvLayout& L, const HeadBlock& hb, int n_tok, const float* const* q,
                       float* m_io, float* l_io, float* acc) {
  constexpr KvType KT = T == KvType::Int8Fp8 ? KvType::Int8 : T;
  constexpr KvType VT = T == KvType::F16    ? KvType::F16
                        : T == KvType::Int8 ? KvType::Int8
                                            : KvType::Int8Fp8;
  const int n = L.head_dim;
  alignas(32) float s[NR][264];
  float mb[NR], corr[NR];
  for (int r = 0; r < NR; ++r) mb[r] = -std::numeric_limits<float>::infinity();
  for (int t = 0; t < n_tok; ++t) {
    float d[NR];
    key_dots<KT, NR>(hb.k + size_t(t) * L.k_row, n, q, d);
    for (int r = 0; r < NR; ++r) {
      if constexpr (T != KvType::F16) d[r] *= hb.ks[t];
      s[r][t] = d[r];
      mb[r] = std::max(mb[r], d[r]);
    }
  }
  const int padded = (n_tok + 7) & ~7;
  for (int r = 0; r < NR; ++r) {
    const float m_new = std::max(m_io[r], mb[r]);
    corr[r] = std::exp(m_io[r] - m_new);
    for (int t = n_tok; t < padded; ++t) s[r][t] = -std::numeric_limits<float>::infinity();
    const __m256 mv = _mm256_set1_ps(m_new);
    __m256 sum = _mm256_setzero_ps();
    for (int t = 0; t < padded; t += 8) {
      const __m256 p = exp_neg(_mm256_sub_ps(_mm256_load_ps(s[r] + t), mv));
      sum = _mm256_add_ps(sum, p);
      _mm256_store_ps(s[r] + t, p);
    }
    l_io[r] = l_io[r] * corr[r] + hsum(sum);
    m_io[r] = m_new;
    if constexpr (T != KvType::F16) {
      const float k = VT == KvType::Int8Fp8 ? 256.0f : 1.0f;
      for (int t = 0; t < n_tok; ++t) s[r][t] *= hb.vs[t] * k;
    }
  }
  value_accumulate_rows<VT, NR>(hb.v, L.v_row, n_tok, n, s, corr, acc, n);
}

template <KvType T>
void attend_rows_avx2(const KvLayout& L, const HeadBlock& hb, int n_tok, int nr,
                      const float* const* q, float* m, float* l, float* acc) {
  if (n_tok <= 0) return;
  const int hd = L.head_dim;
  for (int r = 0; r < nr;) {
    const int left = nr - r;
    const int take = left >= 4 ? 4 : left;
    switch (take) {
      case 4:
        attend_rows_fixed<T, 4>(L, hb, n_tok, q + r, m + r, l + r, acc + r * hd);
        break;
      case 3:
        attend_rows_fixed<T, 3>(L, hb, n_tok, q + r, m + r, l + r, acc + r * hd);
        break;
      case 2:
        attend_rows_fixed<T, 2>(L, hb, n_tok, q + r, m + r, l + r, acc + r * hd);
        break;
      default:
        attend_rows_fixed<T, 1>(L, hb, n_tok, q + r, m + r, l + r, acc + r * hd);
        break;
    }
    r += take;
  }
}

// The one-row kernel is the NR = 1 case.
template <KvType T>
void attend_block_avx2(const KvLayout& L, const HeadBlock& hb, int n_tok, const float* q, float* m,
                       float* l, float* acc) {
  if (n_tok > 0) attend_rows_fixed<T, 1>(L, hb, n_tok, &q, m, l, acc);
}

}  // namespace

// The table only: kv_attend.cpp (generic code) asks kernels' dispatch point
// before using it, so no AVX2 instruction runs on a CPU without it.
const AttendKernels* avx2_attend_table() {
  static const AttendKernels k{
      "avx2",
      {attend_block_avx2<KvType::F16>, attend_block_avx2<KvType::Int8>,
       attend_block_avx2<KvType::Int8Fp8>, attend_block_avx2<KvType::Int4Fp8>},
      {attend_rows_avx2<KvType::F16>, attend_rows_avx2<KvType::Int8>,
       attend_rows_avx2<KvType::Int8Fp8>, attend_rows_avx2<KvType::Int4Fp8>}};
  return &k;
}

}  // namespace tern::kv
