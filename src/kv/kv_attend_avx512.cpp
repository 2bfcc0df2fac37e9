// AVX-512 tile attention for CPUs with AVX512-VNNI and AVX512-BF16 (Zen 4,
// Sapphire Rapids and later). Built with TERN_AVX2_FLAGS plus the AVX-512
// flags; used only when kernels' dispatch point chose its AVX-512 VNNI table
// and the CPU has BF16 (kv_attend.cpp).
//
// The same tile as the AVX2 kernel (a block decoded once for every row, each
// row on its own), in integer and bf16 arithmetic:
//   - scores: in fp32, exactly as the AVX2 kernel computes them (a query
//     rounded to int8 or int16 was tried: a few outlier dims of real
//     queries make its scale coarse for the rest, and sharp softmaxes turn
//     that into a 0.8% perplexity loss);
//   - values: the probabilities rounded to bf16 (the softmax sum taken from
//     the rounded values, so the weights still sum to one) and the value rows
//     times their scales rounded to bf16, interleaved by token pairs,
//     accumulated by vdpbf16ps into fp32 (32 products per instruction).
// The rounding this adds (2^-9 relative on weights and values) is below the KV
// cache's own (int8 keys, fp8 values); every row's numbers still depend only
// on its own query and the block, so tiles, chunking and split-K decode stay
// bit-identical among themselves. F16 caches use the AVX2 kernels.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tern/kernels/x86_simd.h"
#include "tern/kv/kv_attend.h"

namespace tern::kv {
namespace {

using kernels::x86::exp_neg;
using kernels::x86::hsum;

struct Buffers {
  std::vector<float> k;       // (n8, hd8) keys as fp32 (codes), zero-padded
  std::vector<float> kscale;  // (n8) key scales (1 beyond n)
  std::vector<uint16_t> v;    // (n8 / 2, hd16, 2) bf16 values, token pairs interleaved
  std::vector<float> q;       // (hd8) the row's query, zero-padded
  std::vector<float> s;       // (n8) scores, then probabilities
  std::vector<uint32_t> p2;   // (n8 / 2) bf16 probability pairs
};

Buffers& buffers(size_t keys, size_t dims) {
  thread_local Buffers b;
  const size_t d32 = (dims + 31) & ~size_t(31);
  if (b.k.size() < keys * d32) {
    b.k.resize(keys * d32);
    b.v.resize(keys * d32);
  }
  if (b.q.size() < d32) b.q.resize(d32);
  if (b.kscale.size() < keys) {
    b.s.resize(keys + 16), b.kscale.resize(keys), b.p2.resize(keys / 2 + 8);
  }
  return b;
}

// Key codes of rows [0, n) as fp32 (exact), padded to hd8 dims and n8 rows
// with zeros.
template <KvType T>
void stage_keys(const KvLayout& L, const HeadBlock& hb, int n, int n8, int hd, int hd8,
                Buffers& b) {
  for (int t = 0; t < n8; ++t) {
    float* o = b.k.data() + size_t(t) * size_t(hd8);
    if (t >= n) {
      std::fill_n(o, hd8, 0.0f);
      b.kscale[size_t(t)] = 1.0f;
      continue;
    }
    const uint8_t* row = hb.k + size_t(t) * L.k_row;
    if constexpr (T == KvType::Int4Fp8) {
      const int half = hd / 2;
      for (int j = 0; j < half; ++j) {
        o[j] = float(int(row[j] & 15) - 8);
        o[half + j] = float(int(row[j] >> 4) - 8);
      }
    } else {
      int j = 0;
      for (; j + 16 <= hd; j += 16)
        _mm512_storeu_ps(o + j, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j)))));
      for (; j < hd; ++j) o[j] = float(int8_t(row[j]));
    }
    std::fill(o + hd, o + hd8, 0.0f);
    b.kscale[size_t(t)] = hb.ks[t];
  }
}

#include "kv_tile_scores.inl"

// 16 values of a row (dims j.., `mask` of them valid, the rest 0) as fp32.
template <KvType T>
inline __m512 load16_value(const uint8_t* row, int j, __mmask16 mask, __m512 scale) {
  const __m128i x = _mm_maskz_loadu_epi8(mask, row + j);
  if constexpr (T == KvType::Int8) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(x)), scale);
  } else {
    // e4m3 -> fp16 bits (as the AVX2 kernel does): value / 256, exactly.
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(x), 7),
                                       _mm256_set1_epi16(int16_t(0xbf80)));
    return _mm512_mul_ps(_mm512_cvtph_ps(h), scale);
  }
}

// Value rows [0, n) as bf16 (exact: fp8 and int8 codes fit), token pairs
// interleaved: v[(t/2)*hd16*2 + d*2 + t%2]; missing tokens and dims are 0.
template <KvType T>
void stage_values(const KvLayout& L, const HeadBlock& hb, int n, int n8, int hd, int hd16,
                  Buffers& b) {
  const float v_unit = T == KvType::Int8 ? 1.0f : 256.0f;
  const __m512i interleave =
      _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int tp = 0; tp < n8 / 2; ++tp) {
    const int t0 = 2 * tp, t1 = t0 + 1;
    uint16_t* o = b.v.data() + size_t(tp) * size_t(hd16) * 2;
    // Each row times its scale (fp8 rows decode as value / 256), rounded to
    // bf16 once: 2^-9 relative, far below the codes' own rounding.
    const __m512 s0 = _mm512_set1_ps(t0 < n ? hb.vs[t0] * v_unit : 0.0f);
    const __m512 s1 = _mm512_set1_ps(t1 < n ? hb.vs[t1] * v_unit : 0.0f);
    for (int j = 0; j < hd16; j += 16) {
      const __mmask16 dims = __mmask16(hd - j >= 16 ? 0xffff : (1u << (hd - j)) - 1u);
      const __m512 a =
          t0 < n ? load16_value<T>(hb.v + size_t(t0) * L.v_row, j, dims, s0) : _mm512_setzero_ps();
      const __m512 c =
          t1 < n ? load16_value<T>(hb.v + size_t(t1) * L.v_row, j, dims, s1) : _mm512_setzero_ps();
      // [a0..a15, c0..c15] as bf16, then a0 c0 a1 c1 ...
      const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(c, a);
      _mm512_storeu_si512(o + size_t(j) * 2, _mm512_permutexvar_epi16(interleave, both));
    }
  }
}

// acc[0, 16*S) (the last strip `last` dims) = acc * corr + sum over token
// pairs of p2 . v.
template <int S>
void accumulate(const uint16_t* v, int hd16, int pairs, const uint32_t* p2, float corr, float* acc,
                int last) {
  __m512 a[S];
  const __mmask16 tail = __mmask16((1u << last) - 1u);
  const __m512 c = _mm512_set1_ps(corr);
  for (int i = 0; i < S; ++i) {
    const __m512 x = i + 1 < S || last == 16 ? _mm512_loadu_ps(acc + 16 * i)
                                             : _mm512_maskz_loadu_ps(tail, acc + 16 * i);
    a[i] = _mm512_mul_ps(x, c);
  }
  for (int tp = 0; tp < pairs; ++tp) {
    const __m512bh pb = (__m512bh)_mm512_set1_epi32(int(p2[tp]));
    const uint16_t* row = v + size_t(tp) * size_t(hd16) * 2;
    for (int i = 0; i < S; ++i)
      a[i] = _mm512_dpbf16_ps(a[i], pb, (__m512bh)_mm512_loadu_si512(row + 32 * i));
  }
  for (int i = 0; i < S; ++i) {
    if (i + 1 < S || last == 16)
      _mm512_storeu_ps(acc + 16 * i, a[i]);
    else
      _mm512_mask_storeu_ps(acc + 16 * i, tail, a[i]);
  }
}

template <KvType T>
void attend_tile_avx512(const KvLayout& L, const HeadBlock& hb, int nr, const int* n_tok,
                        const float* const* q, float* m_io, float* l_io, float* acc) {
  const int hd = L.head_dim, hd8 = (hd + 7) & ~7, hd16 = (hd + 15) & ~15;
  int n_max = 0;
  for (int r = 0; r < nr; ++r) n_max = std::max(n_max, n_tok[r]);
  if (n_max <= 0) return;
  const int n8 = (n_max + 7) & ~7;
  Buffers& B = buffers(size_t(n8), size_t(hd));
  stage_keys<T>(L, hb, n_max, n8, hd, hd8, B);
  stage_values<T>(L, hb, n_max, n8, hd, hd16, B);
  float* s = B.s.data();
  for (int r = 0; r < nr; ++r) {
    const int n = n_tok[r];
    if (n <= 0) continue;
    std::copy_n(q[r], hd, B.q.data());
    std::fill(B.q.begin() + hd, B.q.begin() + hd8, 0.0f);
    const int np = (n + 7) & ~7;
    const float m_new =
        std::max(m_io[r], tile_scores(B.q.data(), B.k.data(), B.kscale.data(), hd8, n, s));
    const float corr = std::exp(m_io[r] - m_new);
    const __m256 mv = _mm256_set1_ps(m_new);
    for (int t = 0; t < np; t += 8)
      _mm256_storeu_ps(s + t, exp_neg(_mm256_sub_ps(_mm256_loadu_ps(s + t), mv)));
    // The probabilities as bf16, in token order (adjacent pairs are the
    // 32-bit broadcasts vdpbf16ps takes; tokens past n get 0), and l summed
    // from those same rounded values, so the weights still sum to exactly
    // one: a softmax dominated by one token loses nothing.
    const int pairs = (n + 1) / 2;
    __m512 sum = _mm512_setzero_ps();
    for (int t = 0; t < 2 * pairs; t += 16) {
      const __mmask16 live = __mmask16(n - t >= 16 ? 0xffff : (1u << (n - t)) - 1u);
      const __m256i pb = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(live, s + t));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(B.p2.data() + t / 2), pb);
      sum =
          _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(pb), 16)));
    }
    l_io[r] = l_io[r] * corr + _mm512_reduce_add_ps(sum);
    m_io[r] = m_new;
    float* a = acc + size_t(r) * size_t(hd);
    for (int j0 = 0; j0 < hd; j0 += 128) {
      const int dims = std::min(128, hd - j0);
      const int strips = (dims + 15) / 16, last = dims - 16 * (strips - 1);
      const uint16_t* v = B.v.data() + size_t(j0) * 2;
      switch (strips) {
        case 8:
          accumulate<8>(v, hd16, pairs, B.p2.data(), corr, a + j0, last);
          break;
        case 7:
          accumulate<7>(v, hd16, pairs, B.p2.data(), corr, a + j0, last);
          break;
        case 6:
          accumulate<6>(v, hd16, pairs, B.p2.data(), corr, a + j0, last);
          break;
        case 5:
          accumulate<5>(v, hd16, pairs, B.p2.data(), corr, a + j0, last);
          break;
        case 4:
          accumulate<4>(v, hd16, pairs, B.p2.data(), corr, a + j0, last);
          break;
        case 3:
          accumulate<3>(v, hd16, pairs, B.p2.data(), corr, a + j0, last);
          break;
        case 2:
          accumulate<2>(v, hd16, pairs, B.p2.data(), corr, a + j0, last);
          break;
        default:
          accumulate<1>(v, hd16, pairs, B.p2.data(), corr, a + j0, last);
          break;
      }
    }
  }
}

template <KvType T>
void attend_rows_avx512(const KvLayout& L, const HeadBlock& hb, int n_tok, int nr,
                        const float* const* q, float* m, float* l, float* acc) {
  int n[kMaxTileRows];
  for (int r0 = 0; r0 < nr; r0 += kMaxTileRows) {
    const int k = std::min(kMaxTileRows, nr - r0);
    std::fill_n(n, k, n_tok);
    attend_tile_avx512<T>(L, hb, k, n, q + r0, m + r0, l + r0, acc + size_t(r0) * L.head_dim);
  }
}

template <KvType T>
void attend_block_avx512(const KvLayout& L, const HeadBlock& hb, int n_tok, const float* q,
                         float* m, float* l, float* acc) {
  attend_tile_avx512<T>(L, hb, 1, &n_tok, &q, m, l, acc);
}

}  // namespace

// F16 caches keep the AVX2 kernels (their keys are not integers).
const AttendKernels* avx512_attend_table(const AttendKernels& avx2) {
  static const AttendKernels k{
      "avx512",
      {avx2.block[int(KvType::F16)], attend_block_avx512<KvType::Int8>,
       attend_block_avx512<KvType::Int8Fp8>, attend_block_avx512<KvType::Int4Fp8>},
      {avx2.rows[int(KvType::F16)], attend_rows_avx512<KvType::Int8>,
       attend_rows_avx512<KvType::Int8Fp8>, attend_rows_avx512<KvType::Int4Fp8>},
      {avx2.tile[int(KvType::F16)], attend_tile_avx512<KvType::Int8>,
       attend_tile_avx512<KvType::Int8Fp8>, attend_tile_avx512<KvType::Int4Fp8>}};
  return &k;
}

}  // namespace tern::kv
