// AVX-512 tile attention for CPUs with AVX512-VNNI, AVX512-BF16 and
// AVX512-VBMI (Zen 4, Ice Lake server, Sapphire Rapids and later). Built with
// TERN_AVX2_FLAGS plus the AVX-512 flags; used only when kernels' dispatch
// point chose its AVX-512 VNNI table and the CPU has BF16 and VBMI
// (kv_attend.cpp).
//
// The same tile as the AVX2 kernel (a block decoded once for every row, each
// row on its own):
//   - scores: for head sizes that are a multiple of 8 (up to 256), int16
//     keys against the query rounded to 15-bit codes with one scale, by
//     vpdpwssd (32 multiply-adds an instruction); else fp32 FMAs. Either way
//     the keys are staged in groups of 4 keys per register (one 128-bit block
//     each), so a key's 4 lane sums need two shuffle levels, not the four of
//     a plain horizontal sum. (An int8 query was tried before: a few outlier
//     dims of real queries make its scale coarse for the rest, a 0.8%
//     perplexity loss. 15 bits measured at c=1024, int8-fp8 KV: SmolLM2
//     30.429 -> 30.292, Gemma 3 28.793 -> 28.904 (fp32 scores on AVX2: 30.338,
//     28.833); prefill of 512 at depth 4096 +7-18%. llama.cpp's CPU flash
//     attention rounds the query to 8 bits against q8_0 keys.);
//   - values: the codes are exact in bf16 (a 128-entry byte table per half,
//     vpermi2b), token pairs interleaved; each probability times its token's
//     value scale is rounded to bf16 once, and vdpbf16ps accumulates into
//     fp32 (32 products per instruction).
// The rounding this adds (2^-9 relative on one weight per token) is below the
// KV cache's own (int8 keys, fp8 values); every row's numbers depend only on
// its own query and the block, so tiles, chunking and split-K decode stay
// bit-identical among themselves. F16 caches use the AVX2 kernels.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../kernels/x86_simd.h"  // private to the x86 files of kernels and kv
#include "tern/kv/kv_attend.h"

namespace tern::kv {
namespace {

using kernels::x86::exp_neg;

struct Buffers {
  std::vector<float> k;       // (n16 / 16, hd4 / 4, 4 groups, 16) staged keys, see stage_keys
  std::vector<uint16_t> v;    // (n16 / 2, hd16, 2) bf16 value codes, token pairs interleaved
  std::vector<int8_t> codes;  // (n, hd) int4 keys unpacked to int8 codes
  std::vector<float> q;       // (hd4) the row's query, zero-padded
  std::vector<float> s;       // (n16) scores, then probabilities
  std::vector<uint32_t> p2;   // (4, n16 / 2) bf16 pairs of probability x value scale per row
  std::vector<int16_t> ki;    // (n16 / 16, hd / 8, 4 groups, 32) staged int16 keys, stage_keys_i16
  std::vector<int16_t> qi;    // (kMaxTileRows, d64) the rows' queries as 15-bit codes
  std::vector<float> qs;      // (kMaxTileRows) their scales
};

Buffers& buffers(size_t keys, size_t dims) {
  thread_local Buffers b;
  const size_t d64 = (dims + 63) & ~size_t(63);
  if (b.k.size() < keys * d64) {
    b.k.resize(keys * d64);
    b.v.resize(keys * d64);
    b.codes.resize(keys * d64);
    b.ki.resize(keys * d64);
  }
  if (b.q.size() < d64) b.q.resize(d64), b.qi.resize(kMaxTileRows * d64), b.qs.resize(kMaxTileRows);
  if (b.s.size() < keys) {
    b.s.resize(keys);
    b.p2.resize(keys / 2 * 4);  // kRun rows
  }
  return b;
}

inline __mmask64 dims_mask(int left) {
  return left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
}

// --- Keys -------------------------------------------------------------------
//
// Keys [0, n16) in super-groups of 16; within one, group i (0..3) holds keys
// i, i + 4, i + 8, i + 12, and register (sg, j, i) holds those 4 keys' dims
// 4j..4j+3 (one 128-bit block per key): 4 keys x 4 dims. A row's FMA against
// it leaves each key's 4 partial sums in its own block, and two shuffle
// levels over the 4 groups give 16 scores in token order.

// Codes of keys [0, n) (int8 rows of `stride` bytes), missing keys and dims 0.
void stage_keys(const int8_t* codes, size_t stride, int n, int n16, int hd, float* out) {
  const int J = (hd + 3) / 4;  // 4-dim chunks
  for (int sg = 0; sg < n16 / 16; ++sg) {
    for (int i = 0; i < 4; ++i) {
      for (int c = 0; c * 64 < hd; ++c) {
        const __mmask64 dm = dims_mask(hd - 64 * c);
        __m512i r[4];
        for (int b = 0; b < 4; ++b) {
          const int t = 16 * sg + i + 4 * b;
          r[b] = t < n ? _mm512_maskz_loadu_epi8(dm, codes + size_t(t) * stride + 64 * c)
                       : _mm512_setzero_si512();
        }
        // Dword transpose: x[w] lane k = dims chunk 4k + w of keys b = 0..3.
        const __m512i a = _mm512_unpacklo_epi32(r[0], r[1]), bb = _mm512_unpackhi_epi32(r[0], r[1]);
        const __m512i cc = _mm512_unpacklo_epi32(r[2], r[3]), d = _mm512_unpackhi_epi32(r[2], r[3]);
        const __m512i x[4] = {_mm512_unpacklo_epi64(a, cc), _mm512_unpackhi_epi64(a, cc),
                              _mm512_unpacklo_epi64(bb, d), _mm512_unpackhi_epi64(bb, d)};
        for (int k = 0; k < 4; ++k) {
          for (int w = 0; w < 4; ++w) {
            const int j = 16 * c + 4 * k + w;
            if (j >= J) continue;
            __m128i lane;
            switch (k) {  // the lane index must be a constant
              case 0:
                lane = _mm512_castsi512_si128(x[w]);
                break;
              case 1:
                lane = _mm512_extracti32x4_epi32(x[w], 1);
                break;
              case 2:
                lane = _mm512_extracti32x4_epi32(x[w], 2);
                break;
              default:
                lane = _mm512_extracti32x4_epi32(x[w], 3);
                break;
            }
            _mm512_storeu_ps(out + ((size_t(sg) * J + j) * 4 + i) * 16,
                             _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lane)));
          }
        }
      }
    }
  }
}

// Int4 keys (byte j: dim j in the low nibble, dim j + hd/2 in the high one)
// as int8 code rows of hd bytes.
void unpack_int4(const HeadBlock& hb, size_t k_row, int n, int hd, int8_t* out) {
  const int half = hd / 2;
  for (int t = 0; t < n; ++t) {
    const uint8_t* row = hb.k + size_t(t) * k_row;
    int8_t* o = out + size_t(t) * size_t(hd);
    for (int j = 0; j < half; ++j) {
      o[j] = int8_t(int(row[j] & 15) - 8);
      o[half + j] = int8_t(int(row[j] >> 4) - 8);
    }
  }
}

struct V16 {
  using T = __m512;
  static constexpr int kLanes = 16;
  static T zero() { return _mm512_setzero_ps(); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static T bcast4(const float* p) { return _mm512_broadcast_f32x4(_mm_loadu_ps(p)); }
  static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  template <int imm>
  static T shuffle(T a, T b) {
    return _mm512_shuffle_ps(a, b, imm);
  }
};

#include "kv_grouped_scores.inl"

// s[0, n16) = the row's scores times kscale (n floats); keys at or past n
// score -inf.
// Returns the row's block max.
inline float row_scores(const float* q, const float* kf, const float* kscale, int J, int n,
                        float* s) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 mx = ninf;
  auto finish = [&](int t0, __m512 sv) {
    const __mmask16 live = __mmask16(n - t0 >= 16 ? 0xffff : (1u << (n - t0)) - 1u);
    sv = _mm512_mask_blend_ps(live, ninf,
                              _mm512_mul_ps(sv, _mm512_maskz_loadu_ps(live, kscale + t0)));
    mx = _mm512_max_ps(mx, sv);
    _mm512_storeu_ps(s + t0, sv);
  };
  score_row<V16>(q, kf, J, n, finish);
  return _mm512_reduce_max_ps(mx);
}

// --- Integer scores ---------------------------------------------------------
//
// For head sizes that are a multiple of 8 (up to 256: exact int32 sums,
// |sum| <= 256 x 32767 x 128 < 2^31), keys are staged as int16 in the same
// groups, register (sg, j, i) holding keys i, i + 4, i + 8, i + 12's dims
// 8j..8j+7 (one 128-bit block per key), and each row's query is rounded to
// 15-bit codes with one scale: vpdpwssd then does 32 multiply-adds where an
// fp32 FMA does 16, and each key's 4 lane sums reduce as before. The error
// this adds (half a query code step times the key row's L1 norm: ~1e-3 on a
// score at worst on real models, tests/unit/kv/kv_attend_test.cpp) is below
// the KV's own rounding; see kv_attend_avx2.cpp for the perplexity measured.
inline constexpr int kMaxIntScoreDims = 256;

void stage_keys_i16(const int8_t* codes, size_t stride, int n, int n16, int hd, int16_t* out) {
  const int J8 = hd / 8;
  for (int sg = 0; sg < n16 / 16; ++sg) {
    for (int i = 0; i < 4; ++i) {
      for (int b = 0; b < 4; ++b) {
        const int t = 16 * sg + i + 4 * b;
        const int8_t* row = codes + size_t(t) * stride;
        for (int j = 0; j < J8; ++j) {
          const __m128i w = t < n ? _mm_cvtepi8_epi16(_mm_loadl_epi64(
                                        reinterpret_cast<const __m128i*>(row + 8 * j)))
                                  : _mm_setzero_si128();
          _mm_storeu_si128(
              reinterpret_cast<__m128i*>(out + ((size_t(sg) * J8 + j) * 4 + i) * 32 + 8 * b), w);
        }
      }
    }
  }
}

// The row's query as int16 codes (round to nearest) with one scale, amax /
// 32767; hd is a multiple of 8.
inline float quantize_q_i16(const float* q, int hd, int16_t* out) {
  __m512 mx = _mm512_setzero_ps();
  int j = 0;
  for (; j + 16 <= hd; j += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(q + j)));
  if (j < hd) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(__mmask16(0xff), q + j)));
  const float amax = _mm512_reduce_max_ps(mx);
  const __m512 iv = _mm512_set1_ps(amax > 0.0f ? 32767.0f / amax : 0.0f);
  for (j = 0; j + 16 <= hd; j += 16)
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out + j),
        _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(q + j), iv))));
  if (j < hd)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j),
                     _mm256_castsi256_si128(_mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(
                         _mm512_mul_ps(_mm512_maskz_loadu_ps(__mmask16(0xff), q + j), iv)))));
  return amax / 32767.0f;
}

template <int imm>
inline __m512i shuffle_i(__m512i a, __m512i b) {
  return _mm512_castps_si512(
      _mm512_shuffle_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b), imm));
}

// Four groups' lane sums -> 16 int32 scores in token order (reduce_groups' shuffles).
inline __m512i reduce_groups_i(const __m512i* a) {
  const __m512i d01 = _mm512_add_epi32(shuffle_i<0x44>(a[0], a[1]), shuffle_i<0xee>(a[0], a[1]));
  const __m512i d23 = _mm512_add_epi32(shuffle_i<0x44>(a[2], a[3]), shuffle_i<0xee>(a[2], a[3]));
  return _mm512_add_epi32(shuffle_i<0x88>(d01, d23), shuffle_i<0xdd>(d01, d23));
}

template <int SG>
inline void score_groups_i16(const int16_t* q, const int16_t* k0, int J8, __m512i* out) {
  __m512i a[SG][4];
  for (int g = 0; g < SG; ++g)
    for (int i = 0; i < 4; ++i) a[g][i] = _mm512_setzero_si512();
  for (int j = 0; j < J8; ++j) {
    const __m512i qv =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 8 * j)));
    for (int g = 0; g < SG; ++g) {
      const int16_t* k = k0 + (size_t(g) * size_t(J8) + size_t(j)) * 4 * 32;
      for (int i = 0; i < 4; ++i)
        a[g][i] = _mm512_dpwssd_epi32(a[g][i], qv, _mm512_loadu_si512(k + 32 * i));
    }
  }
  for (int g = 0; g < SG; ++g) out[g] = reduce_groups_i(a[g]);
}

// row_scores with int16 keys and query codes (scale qs).
inline float row_scores_i16(const int16_t* q, float qs, const int16_t* ki, const float* kscale,
                            int J8, int n, float* s) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 qsv = _mm512_set1_ps(qs);
  __m512 mx = ninf;
  auto finish = [&](int t0, __m512i si) {
    const __mmask16 live = __mmask16(n - t0 >= 16 ? 0xffff : (1u << (n - t0)) - 1u);
    const __m512 sv = _mm512_mask_blend_ps(live, ninf,
                                           _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(si), qsv),
                                                         _mm512_maskz_loadu_ps(live, kscale + t0)));
    mx = _mm512_max_ps(mx, sv);
    _mm512_storeu_ps(s + t0, sv);
  };
  const int np = (n + 15) / 16 * 16;
  int t0 = 0;
  for (; t0 + 32 <= np; t0 += 32) {
    __m512i sv[2];
    score_groups_i16<2>(q, ki + size_t(t0) * size_t(8 * J8), J8, sv);
    finish(t0, sv[0]);
    finish(t0 + 16, sv[1]);
  }
  if (t0 < np) {
    __m512i sv[1];
    score_groups_i16<1>(q, ki + size_t(t0) * size_t(8 * J8), J8, sv);
    finish(t0, sv[0]);
  }
  return _mm512_reduce_max_ps(mx);
}

// --- Values -----------------------------------------------------------------

// bf16 of the value code magnitudes 0..127 (fp8 e4m3 or int8), low and high
// bytes, as the two 64-byte halves vpermi2b indexes with 7 bits.
struct ValueTable {
  alignas(64) uint8_t lo[128], hi[128];
};
template <KvType T>
const ValueTable& value_table() {
  static const ValueTable t = [] {
    ValueTable v{};
    for (int m = 0; m < 128; ++m) {
      const float x = T == KvType::Int8 ? float(m) : fp8_decode(uint8_t(m == 127 ? 126 : m));
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      v.lo[m] = uint8_t(bits >> 16), v.hi[m] = uint8_t(bits >> 24);
    }
    return v;
  }();
  return t;
}

// r'[16k + 4o + w] = r[16o + 4k + w] (k, o, w in 0..3): after byte and
// word interleaving, output o, lane k, pair w holds dim 16o + 4k + w.
struct BytePerm {
  alignas(64) uint8_t b[64];
};
BytePerm value_byte_perm() {
  BytePerm p{};
  for (int k = 0; k < 4; ++k)
    for (int o = 0; o < 4; ++o)
      for (int w = 0; w < 4; ++w) p.b[16 * k + 4 * o + w] = uint8_t(16 * o + 4 * k + w);
  return p;
}

// Value rows [0, n) as bf16 codes (exact), token pairs interleaved:
// v[(t/2)*hd16*2 + d*2 + t%2]; missing tokens and dims are 0. Per 64 dims of
// a pair: the two rows' bytes are pre-permuted (vpermb) so that byte
// interleaving, the table look-up and byte-to-word interleaving leave each
// 16-dim strip in dim order.
template <KvType T>
void stage_values(const KvLayout& L, const HeadBlock& hb, int n, int n16, int hd, int hd16,
                  uint16_t* out) {
  const ValueTable& tab = value_table<T>();
  const __m512i lo0 = _mm512_load_si512(tab.lo), lo1 = _mm512_load_si512(tab.lo + 64);
  const __m512i hi0 = _mm512_load_si512(tab.hi), hi1 = _mm512_load_si512(tab.hi + 64);
  const __m512i sign = _mm512_set1_epi8(int8_t(0x80));
  static const BytePerm perm_bytes = value_byte_perm();
  const __m512i perm = _mm512_load_si512(perm_bytes.b);
  const int strips = hd16 / 16;
  for (int tp = 0; tp < n16 / 2; ++tp) {
    const int t0 = 2 * tp, t1 = t0 + 1;
    uint16_t* o = out + size_t(tp) * size_t(hd16) * 2;
    for (int c = 0; c * 64 < hd; ++c) {
      const __mmask64 dm = dims_mask(hd - 64 * c);
      const __m512i r0 = t0 < n ? _mm512_maskz_loadu_epi8(dm, hb.v + size_t(t0) * L.v_row + 64 * c)
                                : _mm512_setzero_si512();
      const __m512i r1 = t1 < n ? _mm512_maskz_loadu_epi8(dm, hb.v + size_t(t1) * L.v_row + 64 * c)
                                : _mm512_setzero_si512();
      const __m512i p0 = _mm512_permutexvar_epi8(perm, r0), p1 = _mm512_permutexvar_epi8(perm, r1);
      const __m512i xy[2] = {_mm512_unpacklo_epi8(p0, p1), _mm512_unpackhi_epi8(p0, p1)};
      for (int h = 0; h < 2; ++h) {
        const __m512i idx = T == KvType::Int8 ? _mm512_abs_epi8(xy[h]) : xy[h];
        const __m512i lo = _mm512_permutex2var_epi8(lo0, idx, lo1);
        // hi | (code & 0x80): the sign bit.
        const __m512i hi =
            _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, idx, hi1), xy[h], sign, 0xf8);
        const int s0 = 4 * c + 2 * h;
        if (s0 < strips) _mm512_storeu_si512(o + size_t(s0) * 32, _mm512_unpacklo_epi8(lo, hi));
        if (s0 + 1 < strips)
          _mm512_storeu_si512(o + size_t(s0 + 1) * 32, _mm512_unpackhi_epi8(lo, hi));
      }
    }
  }
}

// For R rows that attend the same tokens: acc_r[0, 16*S) (the last strip
// `last` dims) = acc_r * corr[r] + sum over token pairs of p2_r . v, with
// p2_r = p2 + r * p2s. Each row's sums run in the same order whatever R is;
// the rows share the value loads and their chains hide vdpbf16ps' latency.
template <int S, int R>
void accumulate(const uint16_t* v, int hd16, int pairs, const uint32_t* p2, int p2s,
                const float* corr, float* const* acc, int last) {
  __m512 a[R][S];
  const __mmask16 tail = __mmask16((1u << last) - 1u);
  for (int r = 0; r < R; ++r) {
    const __m512 c = _mm512_set1_ps(corr[r]);
    for (int i = 0; i < S; ++i) {
      const __m512 x = i + 1 < S || last == 16 ? _mm512_loadu_ps(acc[r] + 16 * i)
                                               : _mm512_maskz_loadu_ps(tail, acc[r] + 16 * i);
      a[r][i] = _mm512_mul_ps(x, c);
    }
  }
  for (int tp = 0; tp < pairs; ++tp) {
    const uint16_t* row = v + size_t(tp) * size_t(hd16) * 2;
    __m512bh vb[S];
    for (int i = 0; i < S; ++i) vb[i] = (__m512bh)_mm512_loadu_si512(row + 32 * i);
    for (int r = 0; r < R; ++r) {
      const __m512bh pb = (__m512bh)_mm512_set1_epi32(int(p2[size_t(r) * size_t(p2s) + tp]));
      for (int i = 0; i < S; ++i) a[r][i] = _mm512_dpbf16_ps(a[r][i], pb, vb[i]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < S; ++i) {
      if (i + 1 < S || last == 16)
        _mm512_storeu_ps(acc[r] + 16 * i, a[r][i]);
      else
        _mm512_mask_storeu_ps(acc[r] + 16 * i, tail, a[r][i]);
    }
  }
}

constexpr int kRun = 4;  // rows accumulated together
using AccumulateFn = void (*)(const uint16_t*, int, int, const uint32_t*, int, const float*,
                              float* const*, int);
template <int R>
constexpr std::array<AccumulateFn, 4> accumulate_row() {
  return {accumulate<1, R>, accumulate<2, R>, accumulate<3, R>, accumulate<4, R>};
}
// [rows - 1][strips - 1]
constexpr std::array<AccumulateFn, 4> kAccumulate[kRun] = {
    accumulate_row<1>(), accumulate_row<2>(), accumulate_row<3>(), accumulate_row<4>()};

// The row's weights p2 = bf16(p * value scale) in token order (adjacent
// pairs are the 32-bit broadcasts vdpbf16ps takes; tokens past n get 0).
// Returns the softmax sum taken from those same rounded weights (p2 / scale;
// p where the scale is 0), so the weights still sum to one: a softmax
// dominated by one token gives back that token's value to fp32 rounding.
inline float row_weights(float* s, const float* vscale, float m, int n, uint32_t* p2) {
  const __m256 mv = _mm256_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int t = 0; t < n; t += 16) {
    const __mmask16 live = __mmask16(n - t >= 16 ? 0xffff : (1u << (n - t)) - 1u);
    const __m256 e0 = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(s + t), mv));
    const __m256 e1 = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(s + t + 8), mv));
    const __m512 p = _mm512_maskz_mov_ps(
        live, _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(e0)),
                                                  _mm256_castps_pd(e1), 1)));
    const __m512 vs = _mm512_maskz_loadu_ps(live, vscale + t);
    const __m256i pb = (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(p, vs));
    const __m512 w = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(pb), 16));
    const __mmask16 scaled = _mm512_cmp_ps_mask(vs, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    sum = _mm512_add_ps(sum, _mm512_mask_div_ps(p, scaled, w, vs));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p2 + t / 2), pb);
  }
  return _mm512_reduce_add_ps(sum);
}

inline bool int_scores(int hd) {
  return hd % 8 == 0 && hd <= kMaxIntScoreDims;
}
inline size_t qi_stride(int hd) {
  return (size_t(hd) + 63) & ~size_t(63);
}

// The rows' query codes (integer scores only), once per tile or span.
void prepare_rows(int hd, int nr, const float* const* q, Buffers& B) {
  if (!int_scores(hd)) return;
  for (int r = 0; r < nr; ++r)
    B.qs[size_t(r)] = quantize_q_i16(q[r], hd, B.qi.data() + size_t(r) * qi_stride(hd));
}

// One block for rows prepared by prepare_rows.
template <KvType T>
void tile_block(const KvLayout& L, const HeadBlock& hb, int nr, const int* n_tok,
                const float* const* q, Buffers& B, float* m_io, float* l_io, float* acc) {
  const int hd = L.head_dim, hd16 = (hd + 15) & ~15, J = (hd + 3) / 4;
  int n_max = 0;
  for (int r = 0; r < nr; ++r) n_max = std::max(n_max, n_tok[r]);
  if (n_max <= 0) return;
  const int n16 = (n_max + 15) & ~15;
  const int8_t* codes = reinterpret_cast<const int8_t*>(hb.k);
  size_t stride = L.k_row;
  if constexpr (T == KvType::Int4Fp8) {
    unpack_int4(hb, L.k_row, n_max, hd, B.codes.data());
    codes = B.codes.data(), stride = size_t(hd);
  }
  if (int_scores(hd))
    stage_keys_i16(codes, stride, n_max, n16, hd, B.ki.data());
  else
    stage_keys(codes, stride, n_max, n16, hd, B.k.data());
  constexpr KvType VT = T == KvType::Int8 ? KvType::Int8 : KvType::Int8Fp8;
  stage_values<VT>(L, hb, n_max, n16, hd, hd16, B.v.data());
  float* s = B.s.data();
  std::fill(B.q.begin() + hd, B.q.begin() + 4 * J, 0.0f);
  const bool padded = 4 * J != hd;  // else the rows' queries are read in place
  const int p2s = n16 / 2;
  // Runs of up to kRun consecutive rows with the same token count (a GQA
  // group's rows) share the value pass.
  for (int r0 = 0; r0 < nr;) {
    const int n = n_tok[r0];
    int r1 = r0 + 1;
    while (r1 < nr && r1 - r0 < kRun && n_tok[r1] == n) ++r1;
    if (n <= 0) {
      r0 = r1;
      continue;
    }
    float corr[kRun];
    float* accs[kRun];
    for (int r = r0; r < r1; ++r) {
      float block_max;
      if (int_scores(hd)) {
        block_max = row_scores_i16(B.qi.data() + size_t(r) * qi_stride(hd), B.qs[size_t(r)],
                                   B.ki.data(), hb.ks, hd / 8, n, s);
      } else {
        const float* qr = q[r];
        if (padded) qr = std::copy_n(q[r], hd, B.q.data()) - hd;
        block_max = row_scores(qr, B.k.data(), hb.ks, J, n, s);
      }
      const float m_new = std::max(m_io[r], block_max);
      corr[r - r0] = attend_rescale(m_io[r], m_new);
      const float sum = row_weights(s, hb.vs, m_new, n, B.p2.data() + size_t(r - r0) * size_t(p2s));
      l_io[r] = l_io[r] * corr[r - r0] + sum;
      m_io[r] = m_new;
    }
    const int pairs = (n + 1) / 2;
    for (int j0 = 0; j0 < hd; j0 += 64) {
      const int dims = std::min(64, hd - j0);
      const int strips = (dims + 15) / 16, last = dims - 16 * (strips - 1);
      for (int r = r0; r < r1; ++r) accs[r - r0] = acc + size_t(r) * size_t(hd) + j0;
      kAccumulate[r1 - r0 - 1][size_t(strips - 1)](B.v.data() + size_t(j0) * 2, hd16, pairs,
                                                   B.p2.data(), p2s, corr, accs, last);
    }
    r0 = r1;
  }
}

template <KvType T>
void attend_tile_avx512(const KvLayout& L, const HeadBlock& hb, int nr, const int* n_tok,
                        const float* const* q, float* m_io, float* l_io, float* acc) {
  int n_max = 0;
  for (int r = 0; r < nr; ++r) n_max = std::max(n_max, n_tok[r]);
  if (n_max <= 0) return;
  Buffers& B = buffers(size_t((n_max + 15) & ~15), size_t(L.head_dim));
  prepare_rows(L.head_dim, nr, q, B);
  tile_block<T>(L, hb, nr, n_tok, q, B, m_io, l_io, acc);
}

// The tile block by block, the query codes made once.
template <KvType T>
void attend_span_avx512(const KvLayout& L, const HeadBlock* hbs, int n_blocks, int nr,
                        const int* ctx, const float* const* q, float* m_io, float* l_io,
                        float* acc) {
  const int bt = L.block_tokens;
  int ctx_max = 0;
  for (int r = 0; r < nr; ++r) ctx_max = std::max(ctx_max, ctx[r]);
  n_blocks = std::min(n_blocks, (ctx_max + bt - 1) / bt);
  if (n_blocks <= 0) return;
  Buffers& B = buffers(size_t((bt + 15) & ~15), size_t(L.head_dim));
  prepare_rows(L.head_dim, nr, q, B);
  int n[kMaxTileRows];
  for (int i = 0; i < n_blocks; ++i) {
    if (i + 1 < n_blocks) prefetch_head_area(L, hbs[i + 1]);
    for (int r = 0; r < nr; ++r) n[r] = std::clamp(ctx[r] - i * bt, 0, bt);
    tile_block<T>(L, hbs[i], nr, n, q, B, m_io, l_io, acc);
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
       attend_tile_avx512<KvType::Int8Fp8>, attend_tile_avx512<KvType::Int4Fp8>},
      {avx2.span[int(KvType::F16)], attend_span_avx512<KvType::Int8>,
       attend_span_avx512<KvType::Int8Fp8>, attend_span_avx512<KvType::Int4Fp8>}};
  return &k;
}

}  // namespace tern::kv
