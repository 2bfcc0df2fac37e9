// The x86 matrix-product micro-kernels on ymm registers, written once over a
// Dot policy that supplies the integer dot products (AVX2: vpmaddubsw +
// vpmaddwd; AVX-VNNI and AVX-512 VNNI: vpdpbusd). Included only by the per-ISA
// files (gemm_avx2.cpp, gemm_avxvnni.cpp, gemm_avx512.cpp), each compiling its
// own copy with its own flags: hence the anonymous namespace.
//
// A micro-kernel computes R activation rows x one tile of 8 output channels
// (layout and register budget: packed.h). Per output lane it walks the groups
// in order and accumulates with the same fused multiply-adds as the scalar
// reference (gemm_tiles_ref), so the results are bit-identical to it.
//
// Dot policy:
//   Acc4 dot_u4(Acc4 acc, u8 w (0..15), s8 a)  acc += 4-byte dot products
//   __m256i finish4(Acc4)                      -> int32 per lane
//   __m256i prep8(w)                           per-chunk form of int8 weights, shared by all rows
//   __m256i dot_s8(acc32, prep8(w), w, a)      acc32 += 4-byte dot products of w, a
//   __m256i finish8(acc32, isum)               the group's exact int32 sums (isum = sum(a))
//   __m256i dot_u5(acc32, lo, a_lo, hi, a_hi)  acc32 += dot products of two chunks of 5-bit codes
//                                              (0..31) with a, widened to int32 at once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tern/kernels/packed.h"
#include "x86_simd.h"

namespace tern::kernels::x86 {
namespace {

// Stores the 8 lanes of v to y, or only the first n (the last tile's padding rows).
inline void store_tile(float* y, __m256 v, int n) {
  if (n == kTileRows) {
    _mm256_storeu_ps(y, v);
  } else {
    alignas(32) float tmp[kTileRows];
    _mm256_store_ps(tmp, v);
    std::memcpy(y, tmp, sizeof(float) * size_t(n));
  }
}

// Software prefetch of the block `ahead` blocks after p (its `lines` cache
// lines) into L1. The hardware prefetchers alone leave the weight streams
// latency bound (measured: the int4 GEMV streams 1.8x faster with it, the
// 16-row GEMM 1.25x); the address may lie past the matrix (a prefetch never
// faults), so it is formed as an integer.
template <typename Block>
inline void prefetch_ahead(const Block* p, int ahead, int lines) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) + uintptr_t(ahead) * sizeof(Block);
  for (int i = 0; i < lines; ++i)
    _mm_prefetch(reinterpret_cast<const char*>(a + 64 * uintptr_t(i)), _MM_HINT_T0);
}
constexpr int kAheadGemm = 16;  // groups: about one 576-input tile ahead
// The GEMV's distance is g_gemv_prefetch (dispatch.h): CPU-dependent.
constexpr int kLines4 = 3;  // cache lines an Int4Block spans (160 bytes)
constexpr int kLines8 = 5;  // an Int8Block (272 bytes)
constexpr int kLines5 = 3;  // an Int5Block (176 bytes) or Int5AsymBlock (192)
constexpr int kLinesC = 3;  // a Code4Block (144 bytes)

// A Code4Block format's 16 int8 levels in both 128-bit lanes: the vpshufb
// table (indices 0..15 only, so the high bit never zeroes a byte).
inline __m256i codebook_table(const int8_t* cb) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(cb)));
}
// Chunk c of a Code4Block looked up: the levels of the low nibbles (inputs
// 4c..4c+3 of the 8 rows) and the high ones (16+4c..), each in the signed
// form and in Dot's prep8 form (a bytewise map, so a lookup in prep8(table)
// is prep8 of the lookup; a Dot that ignores the signed form loses its
// lookup to dead-code elimination).
struct Levels {
  __m256i lo, lo_prep, hi, hi_prep;
};
template <class Dot>
inline Levels code4_levels(const Code4Block& b, int c, __m256i table, __m256i table_prep) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q[c]));
  const __m256i lo = _mm256_and_si256(w, mask);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), mask);
  return {_mm256_shuffle_epi8(table, lo), _mm256_shuffle_epi8(table_prep, lo),
          _mm256_shuffle_epi8(table, hi), _mm256_shuffle_epi8(table_prep, hi)};
}

// Chunk C of an Int5Block as two vectors of 5-bit codes (packed.h): the low
// and high nibbles of q[C], each with its fifth bit moved from qh to bit 4.
// A 16-bit shift carries bits across the bytes of a lane, but never into bit
// 4 for these counts (0..4), so the mask keeps exactly the wanted bit.
template <int C>
inline __m256i int5_lo(__m256i w, __m256i qh) {
  return _mm256_or_si256(_mm256_and_si256(w, _mm256_set1_epi8(0x0f)),
                         _mm256_and_si256(_mm256_slli_epi16(qh, 4 - C), _mm256_set1_epi8(0x10)));
}
template <int C>
inline __m256i int5_hi(__m256i w, __m256i qh) {
  return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(w, 4), _mm256_set1_epi8(0x0f)),
                         _mm256_and_si256(_mm256_srli_epi16(qh, C), _mm256_set1_epi8(0x10)));
}
// The minimum term's m of the 8 rows (w = d*code + m): -16 d for Int5Sym
// (exact, the reference's product), the stored m for Int5Asym.
inline __m256 int5_min(const Int5Block&, __m256 d) {
  return _mm256_mul_ps(d, _mm256_set1_ps(-16.0f));
}
inline __m256 int5_min(const Int5AsymBlock& b, __m256) {
  return load_f16(b.m);
}
// f(integral_constant<int, C>) for C = 0..3.
template <class F>
inline void for_chunks4(F&& f) {
  f(std::integral_constant<int, 0>{});
  f(std::integral_constant<int, 1>{});
  f(std::integral_constant<int, 2>{});
  f(std::integral_constant<int, 3>{});
}

// Activation rows as the kernels see them: row r of q starts at q + r*n_in,
// its scales at d + r*groups and s + r*groups.
struct Rows {
  const int8_t* q;
  const float* d;
  const float* s;
  const int32_t* isum;
  int n_in, groups;
};

// y[r][0..n_valid) for R rows, one Int4Asym tile (groups blocks at blk).
template <class Dot, int R>
inline void int4_tile(const Int4Block* blk, const Rows& x, float* y, int y_stride, int n_valid) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    const Int4Block& b = blk[g];
    prefetch_ahead(&b, kAheadGemm, kLines4);
    typename Dot::Acc4 sum[R];
    for (int r = 0; r < R; ++r) sum[r] = Dot::zero4();
    for (int c = 0; c < 4; ++c) {
      // Low nibbles: inputs 4c..4c+3 of the 8 rows; high nibbles: 16+4c..16+4c+3.
      const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(b.q[c]));
      const __m256i lo = _mm256_and_si256(w, mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), mask);
      for (int r = 0; r < R; ++r) {
        const int8_t* a = x.q + size_t(r) * x.n_in + g * kGroup + 4 * c;
        sum[r] = Dot::dot_u4(sum[r], lo, bcast4(a));
        sum[r] = Dot::dot_u4(sum[r], hi, bcast4(a + 16));
      }
    }
    const __m256 d = load_f16(b.d), m = load_f16(b.m);
    for (int r = 0; r < R; ++r) {
      const size_t gi = size_t(r) * x.groups + g;
      const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(x.d[gi]));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Dot::finish4(sum[r])), dd, acc[r]);
      acc[r] = _mm256_fmadd_ps(m, _mm256_set1_ps(x.s[gi]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) store_tile(y + size_t(r) * y_stride, acc[r], n_valid);
}

// The same for one Int8Sym tile: prep8 of each chunk once, shared by the R rows.
template <class Dot, int R>
inline void int8_tile(const Int8Block* blk, const Rows& x, float* y, int y_stride, int n_valid) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    const Int8Block& b = blk[g];
    prefetch_ahead(&b, kAheadGemm / 2, kLines8);
    __m256i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q[c]));
      const __m256i wx = Dot::prep8(w);
      for (int r = 0; r < R; ++r) {
        const int8_t* a = x.q + size_t(r) * x.n_in + g * kGroup + 4 * c;
        sum[r] = Dot::dot_s8(sum[r], wx, w, bcast4(a));
      }
    }
    const __m256 d = load_f16(b.d);
    for (int r = 0; r < R; ++r) {
      const size_t gi = size_t(r) * x.groups + g;
      const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(x.d[gi]));
      const __m256i isum = Dot::finish8(sum[r], x.isum[gi]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) store_tile(y + size_t(r) * y_stride, acc[r], n_valid);
}

// The same for one Nl4 / Fp4 tile: the codebook levels of each chunk looked
// up once and shared by the R rows, then int8's dot products.
template <class Dot, int R>
inline void code4_tile(const Code4Block* blk, const int8_t* cb, const Rows& x, float* y,
                       int y_stride, int n_valid) {
  const __m256i table = codebook_table(cb), table_prep = Dot::prep8(table);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    const Code4Block& b = blk[g];
    prefetch_ahead(&b, kAheadGemm, kLinesC);
    __m256i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const Levels v = code4_levels<Dot>(b, c, table, table_prep);
      for (int r = 0; r < R; ++r) {
        const int8_t* a = x.q + size_t(r) * x.n_in + g * kGroup + 4 * c;
        sum[r] = Dot::dot_s8(sum[r], v.lo_prep, v.lo, bcast4(a));
        sum[r] = Dot::dot_s8(sum[r], v.hi_prep, v.hi, bcast4(a + 16));
      }
    }
    const __m256 d = load_f16(b.d);
    for (int r = 0; r < R; ++r) {
      const size_t gi = size_t(r) * x.groups + g;
      const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(x.d[gi]));
      const __m256i isum = Dot::finish8(sum[r], x.isum[gi]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) store_tile(y + size_t(r) * y_stride, acc[r], n_valid);
}

// The same for one Int5Sym or Int5Asym tile (Block: Int5Block or
// Int5AsymBlock): codes 0..31, the minimum term as int4's (int5_min).
template <class Dot, int R, class Block>
inline void int5_tile(const Block* blk, const Rows& x, float* y, int y_stride, int n_valid) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    const Block& b = blk[g];
    prefetch_ahead(&b, kAheadGemm, kLines5);
    __m256i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    for_chunks4([&](auto cc) {
      constexpr int c = decltype(cc)::value;
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q[c]));
      const __m256i lo = int5_lo<c>(w, qh), hi = int5_hi<c>(w, qh);
      for (int r = 0; r < R; ++r) {
        const int8_t* a = x.q + size_t(r) * x.n_in + g * kGroup + 4 * c;
        sum[r] = Dot::dot_u5(sum[r], lo, bcast4(a), hi, bcast4(a + 16));
      }
    });
    const __m256 d = load_f16(b.d), m = int5_min(b, d);
    for (int r = 0; r < R; ++r) {
      const size_t gi = size_t(r) * x.groups + g;
      const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(x.d[gi]));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r]), dd, acc[r]);
      acc[r] = _mm256_fmadd_ps(m, _mm256_set1_ps(x.s[gi]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) store_tile(y + size_t(r) * y_stride, acc[r], n_valid);
}

// Decode (one activation row): NT tiles side by side, so that NT independent
// accumulator chains hide the fma latency (one row has only one chain per
// tile: two dependent fmas a group) and each activation broadcast feeds NT
// tiles. The NT tiles are adjacent in memory: one sequential stream.
template <class Dot, int NT>
inline void int4_gemv(const Int4Block* blk, int tile_blocks, const Rows& x, float* y,
                      int n_valid_last) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  __m256 acc[NT];
  const int ahead = g_gemv_prefetch;
  for (int k = 0; k < NT; ++k) acc[k] = _mm256_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    typename Dot::Acc4 sum[NT];
    for (int k = 0; k < NT; ++k) sum[k] = Dot::zero4();
    const int8_t* a = x.q + g * kGroup;
    if (ahead > 0)
      for (int k = 0; k < NT; ++k) prefetch_ahead(blk + k * tile_blocks + g, ahead, kLines4);
    for (int c = 0; c < 4; ++c) {
      const __m256i a_lo = bcast4(a + 4 * c), a_hi = bcast4(a + 16 + 4 * c);
      for (int k = 0; k < NT; ++k) {
        const __m256i w =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(blk[k * tile_blocks + g].q[c]));
        sum[k] = Dot::dot_u4(sum[k], _mm256_and_si256(w, mask), a_lo);
        sum[k] = Dot::dot_u4(sum[k], _mm256_and_si256(_mm256_srli_epi16(w, 4), mask), a_hi);
      }
    }
    const __m256 xd = _mm256_set1_ps(x.d[g]), xs = _mm256_set1_ps(x.s[g]);
    for (int k = 0; k < NT; ++k) {
      const Int4Block& b = blk[k * tile_blocks + g];
      const __m256 dd = _mm256_mul_ps(load_f16(b.d), xd);
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Dot::finish4(sum[k])), dd, acc[k]);
      acc[k] = _mm256_fmadd_ps(load_f16(b.m), xs, acc[k]);
    }
  }
  for (int k = 0; k < NT; ++k)
    store_tile(y + k * kTileRows, acc[k], k == NT - 1 ? n_valid_last : kTileRows);
}

template <class Dot, int NT>
inline void int8_gemv(const Int8Block* blk, int tile_blocks, const Rows& x, float* y,
                      int n_valid_last) {
  __m256 acc[NT];
  const int ahead = g_gemv_prefetch;
  for (int k = 0; k < NT; ++k) acc[k] = _mm256_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    __m256i sum[NT];
    for (int k = 0; k < NT; ++k) sum[k] = _mm256_setzero_si256();
    const int8_t* a = x.q + g * kGroup;
    if (ahead > 0)
      for (int k = 0; k < NT; ++k) prefetch_ahead(blk + k * tile_blocks + g, ahead / 2, kLines8);
    for (int c = 0; c < 8; ++c) {
      const __m256i ac = bcast4(a + 4 * c);
      for (int k = 0; k < NT; ++k) {
        const __m256i w =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[k * tile_blocks + g].q[c]));
        sum[k] = Dot::dot_s8(sum[k], Dot::prep8(w), w, ac);
      }
    }
    const __m256 xd = _mm256_set1_ps(x.d[g]);
    for (int k = 0; k < NT; ++k) {
      const __m256 dd = _mm256_mul_ps(load_f16(blk[k * tile_blocks + g].d), xd);
      const __m256i isum = Dot::finish8(sum[k], x.isum[g]);
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, acc[k]);
    }
  }
  for (int k = 0; k < NT; ++k)
    store_tile(y + k * kTileRows, acc[k], k == NT - 1 ? n_valid_last : kTileRows);
}

template <class Dot, int NT>
inline void code4_gemv(const Code4Block* blk, const int8_t* cb, int tile_blocks, const Rows& x,
                       float* y, int n_valid_last) {
  const __m256i table = codebook_table(cb), table_prep = Dot::prep8(table);
  __m256 acc[NT];
  const int ahead = g_gemv_prefetch;
  for (int k = 0; k < NT; ++k) acc[k] = _mm256_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    __m256i sum[NT];
    for (int k = 0; k < NT; ++k) sum[k] = _mm256_setzero_si256();
    const int8_t* a = x.q + g * kGroup;
    if (ahead > 0)
      for (int k = 0; k < NT; ++k) prefetch_ahead(blk + k * tile_blocks + g, ahead, kLinesC);
    for (int c = 0; c < 4; ++c) {
      const __m256i a_lo = bcast4(a + 4 * c), a_hi = bcast4(a + 16 + 4 * c);
      for (int k = 0; k < NT; ++k) {
        const Levels v = code4_levels<Dot>(blk[k * tile_blocks + g], c, table, table_prep);
        sum[k] = Dot::dot_s8(sum[k], v.lo_prep, v.lo, a_lo);
        sum[k] = Dot::dot_s8(sum[k], v.hi_prep, v.hi, a_hi);
      }
    }
    const __m256 xd = _mm256_set1_ps(x.d[g]);
    for (int k = 0; k < NT; ++k) {
      const __m256 dd = _mm256_mul_ps(load_f16(blk[k * tile_blocks + g].d), xd);
      const __m256i isum = Dot::finish8(sum[k], x.isum[g]);
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, acc[k]);
    }
  }
  for (int k = 0; k < NT; ++k)
    store_tile(y + k * kTileRows, acc[k], k == NT - 1 ? n_valid_last : kTileRows);
}

template <class Dot, int NT, class Block>
inline void int5_gemv(const Block* blk, int tile_blocks, const Rows& x, float* y,
                      int n_valid_last) {
  __m256 acc[NT];
  const int ahead = g_gemv_prefetch;
  for (int k = 0; k < NT; ++k) acc[k] = _mm256_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    __m256i sum[NT], qh[NT];
    const int8_t* a = x.q + g * kGroup;
    for (int k = 0; k < NT; ++k) {
      if (ahead > 0) prefetch_ahead(blk + k * tile_blocks + g, ahead, kLines5);
      sum[k] = _mm256_setzero_si256();
      qh[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[k * tile_blocks + g].qh));
    }
    for_chunks4([&](auto cc) {
      constexpr int c = decltype(cc)::value;
      const __m256i a_lo = bcast4(a + 4 * c), a_hi = bcast4(a + 16 + 4 * c);
      for (int k = 0; k < NT; ++k) {
        const __m256i w =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[k * tile_blocks + g].q[c]));
        sum[k] = Dot::dot_u5(sum[k], int5_lo<c>(w, qh[k]), a_lo, int5_hi<c>(w, qh[k]), a_hi);
      }
    });
    const __m256 xd = _mm256_set1_ps(x.d[g]), xs = _mm256_set1_ps(x.s[g]);
    for (int k = 0; k < NT; ++k) {
      const Block& b = blk[k * tile_blocks + g];
      const __m256 d = load_f16(b.d);
      acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[k]), _mm256_mul_ps(d, xd), acc[k]);
      acc[k] = _mm256_fmadd_ps(int5_min(b, d), xs, acc[k]);
    }
  }
  for (int k = 0; k < NT; ++k)
    store_tile(y + k * kTileRows, acc[k], k == NT - 1 ? n_valid_last : kTileRows);
}

template <class Dot, int NT>
inline void gemv_tiles(const PackedMatrix& w, int t, const Rows& x, float* y) {
  const int n_valid_last = std::min(kTileRows, w.n_out - (t + NT - 1) * kTileRows);
  if (w.format == WeightFormat::Int4Asym) {
    int4_gemv<Dot, NT>(reinterpret_cast<const Int4Block*>(w.tile(t)), x.groups, x, y, n_valid_last);
  } else if (w.format == WeightFormat::Int5Sym) {
    int5_gemv<Dot, NT>(reinterpret_cast<const Int5Block*>(w.tile(t)), x.groups, x, y, n_valid_last);
  } else if (w.format == WeightFormat::Int5Asym) {
    int5_gemv<Dot, NT>(reinterpret_cast<const Int5AsymBlock*>(w.tile(t)), x.groups, x, y,
                       n_valid_last);
  } else if (is_codebook(w.format)) {
    code4_gemv<Dot, NT>(reinterpret_cast<const Code4Block*>(w.tile(t)), codebook_of(w.format),
                        x.groups, x, y, n_valid_last);
  } else {
    int8_gemv<Dot, NT>(reinterpret_cast<const Int8Block*>(w.tile(t)), x.groups, x, y, n_valid_last);
  }
}

template <class Dot, int R>
inline void tile_rows(const PackedMatrix& w, int t, const Rows& x, float* y, int n_valid) {
  if (w.format == WeightFormat::Int4Asym) {
    int4_tile<Dot, R>(reinterpret_cast<const Int4Block*>(w.tile(t)), x, y, w.n_out, n_valid);
  } else if (w.format == WeightFormat::Int5Sym) {
    int5_tile<Dot, R>(reinterpret_cast<const Int5Block*>(w.tile(t)), x, y, w.n_out, n_valid);
  } else if (w.format == WeightFormat::Int5Asym) {
    int5_tile<Dot, R>(reinterpret_cast<const Int5AsymBlock*>(w.tile(t)), x, y, w.n_out, n_valid);
  } else if (is_codebook(w.format)) {
    code4_tile<Dot, R>(reinterpret_cast<const Code4Block*>(w.tile(t)), codebook_of(w.format), x, y,
                       w.n_out, n_valid);
  } else {
    int8_tile<Dot, R>(reinterpret_cast<const Int8Block*>(w.tile(t)), x, y, w.n_out, n_valid);
  }
}

}  // namespace
}  // namespace tern::kernels::x86

#include "gemm_float_x86.inl"

namespace tern::kernels::x86 {
namespace {

// y[r][t*8 + i] for rows [r0, r1) and tiles [t0, t1): each tile (in L1 after
// its first use) is applied to the rows 4 at a time. Float tiles: their own
// kernels (gemm_float_x86.inl).
template <class Dot>
void gemm_tiles(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0, int r1, int t0,
                int t1) {
  if (is_float(w.format)) return float_gemm_tiles(w, qa, y, r0, r1, t0, t1);
  const int groups = w.n_groups();
  if (r1 - r0 == 1) {  // decode: 4 tiles at a time
    const Rows x{qa.q.data() + size_t(r0) * w.n_in,
                 qa.d.data() + size_t(r0) * groups,
                 qa.s.data() + size_t(r0) * groups,
                 qa.isum.data() + size_t(r0) * groups,
                 w.n_in,
                 groups};
    float* yr = y + size_t(r0) * w.n_out;
    int t = t0;
    for (; t + 4 <= t1; t += 4) gemv_tiles<Dot, 4>(w, t, x, yr + t * kTileRows);
    switch (t1 - t) {
      case 3:
        gemv_tiles<Dot, 3>(w, t, x, yr + t * kTileRows);
        break;
      case 2:
        gemv_tiles<Dot, 2>(w, t, x, yr + t * kTileRows);
        break;
      case 1:
        gemv_tiles<Dot, 1>(w, t, x, yr + t * kTileRows);
        break;
      default:
        break;
    }
    return;
  }
  for (int t = t0; t < t1; ++t) {
    const int n_valid = std::min(kTileRows, w.n_out - t * kTileRows);
    for (int r = r0; r < r1; r += 4) {
      const Rows x{qa.q.data() + size_t(r) * w.n_in,
                   qa.d.data() + size_t(r) * groups,
                   qa.s.data() + size_t(r) * groups,
                   qa.isum.data() + size_t(r) * groups,
                   w.n_in,
                   groups};
      float* yr = y + size_t(r) * w.n_out + t * kTileRows;
      switch (std::min(4, r1 - r)) {
        case 4:
          tile_rows<Dot, 4>(w, t, x, yr, n_valid);
          break;
        case 3:
          tile_rows<Dot, 3>(w, t, x, yr, n_valid);
          break;
        case 2:
          tile_rows<Dot, 2>(w, t, x, yr, n_valid);
          break;
        default:
          tile_rows<Dot, 1>(w, t, x, yr, n_valid);
          break;
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels::x86
