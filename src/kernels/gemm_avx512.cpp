// The AVX-512 VNNI kernel table (Ice Lake / Sapphire Rapids servers, Zen 4+).
//
// Same packed layout as every x86 table (packed.h). The batched micro-kernel
// puts two adjacent 8-row tiles side by side in one zmm register: 16 output
// channels per vpdpbusd, twice the work of a ymm instruction, and server cores
// issue two 512-bit integer dot products a cycle. R = 8 activation rows x 16
// channels: 8 int32 sums + 8 fp32 accumulators + low/high nibbles + mask +
// d + m + a broadcast = 22 of the 32 zmm registers, so each 64-byte weight
// chunk is unpacked once for 8 rows. The accumulation order per output lane is
// the reference's (bit-identical). Fewer than 4 rows (decode) and a last odd
// tile use the ymm kernels of gemm_x86.inl, EVEX-encoded (AVX512-VL): decode
// is memory bound, wider registers would not help it.
//
// int8 weights: AVX-512 has no vpsignb, so the weights go unsigned instead
// (w + 128, once per chunk for all rows) and the group's sum is corrected by
// 128 * sum(a), exact in int32.
#include "dispatch.h"
#include "gemm_x86.inl"
#include "ops_avx2.h"

namespace tern::kernels {
namespace {

using x86::Rows;

struct Vnni256Dot {  // vpdpbusd ymm, EVEX-encoded (AVX512-VNNI + VL)
  using Acc4 = __m256i;
  static __m256i zero4() { return _mm256_setzero_si256(); }
  static __m256i dot_u4(__m256i acc, __m256i w, __m256i a) {
    return _mm256_dpbusd_epi32(acc, w, a);
  }
  static __m256i finish4(__m256i acc) { return acc; }
  static __m256i prep8(__m256i w) { return _mm256_xor_si256(w, _mm256_set1_epi8(char(0x80))); }
  static __m256i dot_s8(__m256i acc, __m256i w_plus_128, __m256i, __m256i a) {
    return _mm256_dpbusd_epi32(acc, w_plus_128, a);
  }
  static __m256i finish8(__m256i acc, int32_t isum) {
    return _mm256_sub_epi32(acc, _mm256_set1_epi32(128 * isum));
  }
  static __m256i dot_u5(__m256i acc, __m256i lo, __m256i a_lo, __m256i hi, __m256i a_hi) {
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(acc, lo, a_lo), hi, a_hi);
  }
};

// 32 bytes of tile t0's block and 32 of tile t1's side by side.
inline __m512i load_pair(const void* lo, const void* hi) {
  const __m256i a = _mm256_load_si256(static_cast<const __m256i*>(lo));
  return _mm512_inserti64x4(_mm512_castsi256_si512(a),
                            _mm256_load_si256(static_cast<const __m256i*>(hi)), 1);
}
inline __m512i loadu_pair(const void* lo, const void* hi) {
  const __m256i a = _mm256_loadu_si256(static_cast<const __m256i*>(lo));
  return _mm512_inserti64x4(_mm512_castsi256_si512(a),
                            _mm256_loadu_si256(static_cast<const __m256i*>(hi)), 1);
}
// The 8 fp16 scales of each tile as 16 fp32 lanes.
inline __m512 load_f16_pair(const uint16_t* lo, const uint16_t* hi) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1));
}
inline __m512i bcast4_512(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline void store16(float* y, __m512 v, int n) {
  if (n == 16) {
    _mm512_storeu_ps(y, v);
  } else {
    _mm512_mask_storeu_ps(y, __mmask16((1u << n) - 1), v);
  }
}

// Group g's epilogue for R rows of an unsigned-code format: acc += sum * (d
// * d_x) + m * s_x, the reference's two fused multiply-adds.
template <int R>
inline void add_group_asym(__m512* acc, const __m512i* sum, __m512 d, __m512 m, const Rows& x,
                           int g) {
  for (int r = 0; r < R; ++r) {
    const size_t gi = size_t(r) * x.groups + g;
    const __m512 dd = _mm512_mul_ps(d, _mm512_set1_ps(x.d[gi]));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r]), dd, acc[r]);
    acc[r] = _mm512_fmadd_ps(m, _mm512_set1_ps(x.s[gi]), acc[r]);
  }
}

// The same for a format whose sums ran over weights + 128 (int8, Nl4, Fp4):
// acc += (sum - 128 sum(a)) * (d * d_x), the reference's one fused multiply-add.
template <int R>
inline void add_group_biased(__m512* acc, const __m512i* sum, __m512 d, const Rows& x, int g) {
  for (int r = 0; r < R; ++r) {
    const size_t gi = size_t(r) * x.groups + g;
    const __m512i s = _mm512_sub_epi32(sum[r], _mm512_set1_epi32(128 * x.isum[gi]));
    acc[r] =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(x.d[gi])), acc[r]);
  }
}

// y[r][0..n_valid) for R rows and the tile pair (a, b): 16 output channels.
template <int R>
void int4_pair(const Int4Block* a, const Int4Block* b, const Rows& x, float* y, int y_stride,
               int n_valid) {
  const __m512i mask = _mm512_set1_epi8(0x0f);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    x86::prefetch_ahead(a + g, x86::kAheadGemm, x86::kLines4);
    x86::prefetch_ahead(b + g, x86::kAheadGemm, x86::kLines4);
    __m512i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m512i w = load_pair(a[g].q[c], b[g].q[c]);
      const __m512i lo = _mm512_and_si512(w, mask);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), mask);
      for (int r = 0; r < R; ++r) {
        const int8_t* q = x.q + size_t(r) * x.n_in + g * kGroup + 4 * c;
        sum[r] = _mm512_dpbusd_epi32(sum[r], lo, bcast4_512(q));
        sum[r] = _mm512_dpbusd_epi32(sum[r], hi, bcast4_512(q + 16));
      }
    }
    add_group_asym<R>(acc, sum, load_f16_pair(a[g].d, b[g].d), load_f16_pair(a[g].m, b[g].m), x, g);
  }
  for (int r = 0; r < R; ++r) store16(y + size_t(r) * y_stride, acc[r], n_valid);
}

template <int R>
void int8_pair(const Int8Block* a, const Int8Block* b, const Rows& x, float* y, int y_stride,
               int n_valid) {
  const __m512i bias = _mm512_set1_epi8(char(0x80));
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    x86::prefetch_ahead(a + g, x86::kAheadGemm / 2, x86::kLines8);
    x86::prefetch_ahead(b + g, x86::kAheadGemm / 2, x86::kLines8);
    __m512i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm512_setzero_si512();
    for (int c = 0; c < 8; ++c) {
      const __m512i w = _mm512_xor_si512(loadu_pair(a[g].q[c], b[g].q[c]), bias);  // w + 128
      for (int r = 0; r < R; ++r) {
        sum[r] = _mm512_dpbusd_epi32(sum[r], w,
                                     bcast4_512(x.q + size_t(r) * x.n_in + g * kGroup + 4 * c));
      }
    }
    add_group_biased<R>(acc, sum, load_f16_pair(a[g].d, b[g].d), x, g);
  }
  for (int r = 0; r < R; ++r) store16(y + size_t(r) * y_stride, acc[r], n_valid);
}

// Nl4 / Fp4: the indices of a chunk of two tiles looked up (vpshufb, per
// 128-bit lane) in the codebook plus 128 -- directly the unsigned operand
// int8_pair makes with its xor -- then int8's dot products and correction.
template <int R>
void code4_pair(const Code4Block* a, const Code4Block* b, const int8_t* cb, const Rows& x, float* y,
                int y_stride, int n_valid) {
  const __m512i mask = _mm512_set1_epi8(0x0f);
  const __m512i table = _mm512_xor_si512(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cb))),
      _mm512_set1_epi8(char(0x80)));  // level + 128
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    x86::prefetch_ahead(a + g, x86::kAheadGemm, x86::kLinesC);
    x86::prefetch_ahead(b + g, x86::kAheadGemm, x86::kLinesC);
    __m512i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m512i w = loadu_pair(a[g].q[c], b[g].q[c]);
      const __m512i lo = _mm512_shuffle_epi8(table, _mm512_and_si512(w, mask));
      const __m512i hi =
          _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(w, 4), mask));
      for (int r = 0; r < R; ++r) {
        const int8_t* q = x.q + size_t(r) * x.n_in + g * kGroup + 4 * c;
        sum[r] = _mm512_dpbusd_epi32(sum[r], lo, bcast4_512(q));
        sum[r] = _mm512_dpbusd_epi32(sum[r], hi, bcast4_512(q + 16));
      }
    }
    add_group_biased<R>(acc, sum, load_f16_pair(a[g].d, b[g].d), x, g);
  }
  for (int r = 0; r < R; ++r) store16(y + size_t(r) * y_stride, acc[r], n_valid);
}

// Chunk C of the 5-bit codes of two tiles (gemm_x86.inl's int5_lo / int5_hi, 512 bits wide).
template <int C>
inline __m512i int5_lo512(__m512i w, __m512i qh) {
  return _mm512_or_si512(_mm512_and_si512(w, _mm512_set1_epi8(0x0f)),
                         _mm512_and_si512(_mm512_slli_epi16(qh, 4 - C), _mm512_set1_epi8(0x10)));
}
template <int C>
inline __m512i int5_hi512(__m512i w, __m512i qh) {
  return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(w, 4), _mm512_set1_epi8(0x0f)),
                         _mm512_and_si512(_mm512_srli_epi16(qh, C), _mm512_set1_epi8(0x10)));
}

// The minimum term's m of two tiles' rows: -16 d (Int5Sym) or the stored m (Int5Asym).
inline __m512 int5_min_pair(const Int5Block&, const Int5Block&, __m512 d) {
  return _mm512_mul_ps(d, _mm512_set1_ps(-16.0f));
}
inline __m512 int5_min_pair(const Int5AsymBlock& a, const Int5AsymBlock& b, __m512) {
  return load_f16_pair(a.m, b.m);
}

// Block: Int5Block (Int5Sym) or Int5AsymBlock (Int5Asym).
template <int R, class Block>
void int5_pair(const Block* a, const Block* b, const Rows& x, float* y, int y_stride, int n_valid) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    x86::prefetch_ahead(a + g, x86::kAheadGemm, x86::kLines5);
    x86::prefetch_ahead(b + g, x86::kAheadGemm, x86::kLines5);
    __m512i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm512_setzero_si512();
    const __m512i qh = loadu_pair(a[g].qh, b[g].qh);
    x86::for_chunks4([&](auto cc) {
      constexpr int c = decltype(cc)::value;
      const __m512i w = loadu_pair(a[g].q[c], b[g].q[c]);
      const __m512i lo = int5_lo512<c>(w, qh), hi = int5_hi512<c>(w, qh);
      for (int r = 0; r < R; ++r) {
        const int8_t* q = x.q + size_t(r) * x.n_in + g * kGroup + 4 * c;
        sum[r] = _mm512_dpbusd_epi32(sum[r], lo, bcast4_512(q));
        sum[r] = _mm512_dpbusd_epi32(sum[r], hi, bcast4_512(q + 16));
      }
    });
    const __m512 d = load_f16_pair(a[g].d, b[g].d);
    add_group_asym<R>(acc, sum, d, int5_min_pair(a[g], b[g], d), x, g);
  }
  for (int r = 0; r < R; ++r) store16(y + size_t(r) * y_stride, acc[r], n_valid);
}

template <int R>
void pair_rows(const PackedMatrix& w, int t, const Rows& x, float* y, int n_valid) {
  if (w.format == WeightFormat::Int4Asym) {
    const auto* a = reinterpret_cast<const Int4Block*>(w.tile(t));
    int4_pair<R>(a, a + x.groups, x, y, w.n_out, n_valid);
  } else if (w.format == WeightFormat::Int5Sym) {
    const auto* a = reinterpret_cast<const Int5Block*>(w.tile(t));
    int5_pair<R>(a, a + x.groups, x, y, w.n_out, n_valid);
  } else if (w.format == WeightFormat::Int5Asym) {
    const auto* a = reinterpret_cast<const Int5AsymBlock*>(w.tile(t));
    int5_pair<R>(a, a + x.groups, x, y, w.n_out, n_valid);
  } else if (is_codebook(w.format)) {
    const auto* a = reinterpret_cast<const Code4Block*>(w.tile(t));
    code4_pair<R>(a, a + x.groups, codebook_of(w.format), x, y, w.n_out, n_valid);
  } else {
    const auto* a = reinterpret_cast<const Int8Block*>(w.tile(t));
    int8_pair<R>(a, a + x.groups, x, y, w.n_out, n_valid);
  }
}

// Float tiles (F16 / Bf16, fp32 activations): tiles t and t+1 side by side in
// one zmm (lanes 0-7 and 8-15), both multiplied by one broadcast of
// activation e; per lane the scalar twin's fma over e in order. R = 8 rows x
// 2 pairs (32 channels): 16 accumulators + 2 weights + a broadcast.
struct F16Pair {  // the 8 fp16 values at a and at b as 16 fp32 lanes
  static __m512 load(const uint16_t* a, const uint16_t* b) { return _mm512_cvtph_ps(halves(a, b)); }
  static __m256i halves(const uint16_t* a, const uint16_t* b) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo),
                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  }
};
struct Bf16Pair {  // the same for bfloat16: zero-extend, shift left 16
  static __m512 load(const uint16_t* a, const uint16_t* b) {
    const __m512i u = _mm512_cvtepu16_epi32(F16Pair::halves(a, b));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
  }
};

// y[r][p*16 + i] for R rows of x (stride n_in) and NP tile pairs from `tile`
// (tiles `groups` blocks apart); the last pair keeps n_valid_last lanes.
template <class Pair, int R, int NP>
void float_pairs(const FloatBlock* tile, int groups, const float* x, int n_in, float* y,
                 int y_stride, int n_valid_last) {
  __m512 acc[R][NP];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    const float* xg = x + g * kGroup;
    for (int k = 0; k < kGroup; ++k) {
      __m512 w[NP];
      for (int p = 0; p < NP; ++p)
        w[p] = Pair::load(tile[size_t(2 * p) * groups + g].w[k],
                          tile[size_t(2 * p + 1) * groups + g].w[k]);
      for (int r = 0; r < R; ++r) {
        const __m512 a = _mm512_set1_ps(xg[size_t(r) * n_in + k]);
        for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_fmadd_ps(w[p], a, acc[r][p]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < NP; ++p)
      store16(y + size_t(r) * y_stride + p * 16, acc[r][p], p == NP - 1 ? n_valid_last : 16);
}

// Rows [r0, r1) x the whole pairs of tiles [t0, t1), R rows at a time, then fewer.
template <class Pair, int R>
void float_pair_rows(const PackedMatrix& w, const float* x, float* y, int r0, int r1, int t0,
                     int t1) {
  const auto* tiles = reinterpret_cast<const FloatBlock*>(w.tile(0));
  const int groups = w.n_groups();
  int r = r0;
  for (; r + R <= r1; r += R) {
    for (int t = t0; t + 2 <= t1; t += 4) {
      const int np = t + 4 <= t1 ? 2 : 1, last = t + 2 * np - 2;
      const int n_valid = std::min(16, w.n_out - last * kTileRows);
      const float* xr = x + size_t(r) * w.n_in;
      float* yr = y + size_t(r) * w.n_out + t * kTileRows;
      const FloatBlock* tile = tiles + size_t(t) * groups;
      if (np == 2) {
        float_pairs<Pair, R, 2>(tile, groups, xr, w.n_in, yr, w.n_out, n_valid);
      } else {
        float_pairs<Pair, R, 1>(tile, groups, xr, w.n_in, yr, w.n_out, n_valid);
      }
    }
  }
  if constexpr (R > 1) {
    if (r < r1) float_pair_rows<Pair, R - 1>(w, x, y, r, r1, t0, t1);
  }
}

// Float tiles: pairs on zmm, an odd last tile on the ymm kernels.
void float_gemm_tiles(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0, int r1,
                      int t0, int t1) {
  const int t_pairs = t0 + (t1 - t0) / 2 * 2;
  if (w.format == WeightFormat::F16) {
    float_pair_rows<F16Pair, 8>(w, qa.x, y, r0, r1, t0, t_pairs);
  } else {
    float_pair_rows<Bf16Pair, 8>(w, qa.x, y, r0, r1, t0, t_pairs);
  }
  if (t_pairs < t1) x86::float_gemm_tiles(w, qa, y, r0, r1, t_pairs, t1);
}

constexpr int kRows = 8;

void gemm_tiles(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0, int r1, int t0,
                int t1) {
  if (r1 - r0 < 4) {  // decode: memory bound, the ymm GEMV
    x86::gemm_tiles<Vnni256Dot>(w, qa, y, r0, r1, t0, t1);
    return;
  }
  if (is_float(w.format)) return float_gemm_tiles(w, qa, y, r0, r1, t0, t1);
  const int groups = w.n_groups();
  int t = t0;
  for (; t + 2 <= t1; t += 2) {
    const int n_valid = std::min(2 * kTileRows, w.n_out - t * kTileRows);
    for (int r = r0; r < r1; r += kRows) {
      const Rows x{qa.q.data() + size_t(r) * w.n_in,
                   qa.d.data() + size_t(r) * groups,
                   qa.s.data() + size_t(r) * groups,
                   qa.isum.data() + size_t(r) * groups,
                   w.n_in,
                   groups};
      float* yr = y + size_t(r) * w.n_out + t * kTileRows;
      switch (std::min(kRows, r1 - r)) {
        case 8:
          pair_rows<8>(w, t, x, yr, n_valid);
          break;
        case 7:
          pair_rows<7>(w, t, x, yr, n_valid);
          break;
        case 6:
          pair_rows<6>(w, t, x, yr, n_valid);
          break;
        case 5:
          pair_rows<5>(w, t, x, yr, n_valid);
          break;
        case 4:
          pair_rows<4>(w, t, x, yr, n_valid);
          break;
        case 3:
          pair_rows<3>(w, t, x, yr, n_valid);
          break;
        case 2:
          pair_rows<2>(w, t, x, yr, n_valid);
          break;
        default:
          pair_rows<1>(w, t, x, yr, n_valid);
          break;
      }
    }
  }
  if (t < t1) x86::gemm_tiles<Vnni256Dot>(w, qa, y, r0, r1, t, t1);  // an odd last tile
}

}  // namespace

const KernelTable* avx512_kernels() {
  static const KernelTable t = avx2::table("avx512vnni", gemm_tiles);
  return &t;
}

}  // namespace tern::kernels
