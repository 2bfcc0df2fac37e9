// The x86 matrix-product micro-kernels, written once over a Dot policy that
// supplies the integer dot products (AVX2: vpmaddubsw + vpmaddwd; AVX-VNNI:
// vpdpbusd). Included only by the per-ISA files (gemm_avx2.cpp,
// gemm_avxvnni.cpp), each compiling its own copy with its own flags: hence the
// anonymous namespace.
//
// A micro-kernel computes R activation rows x one tile of 8 output channels
// (layout and register budget: packed.h). Per output lane it walks the groups
// in order and accumulates with the same fused multiply-adds as the scalar
// reference (gemm_tiles_ref), so the results are bit-identical to it.
//
// Dot policy:
//   Acc4 dot_u4(Acc4 acc, u8 w (0..15), s8 a)  acc += 4-byte dot products
//   __m256i finish4(Acc4)                      -> int32 per lane
//   __m256i dot_s8(acc32, |w|, w, a)            acc32 += 4-byte dot products of w, a
#include <algorithm>
#include <cstring>

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

// Activation rows as the kernels see them: row r of q starts at q + r*n_in,
// its scales at d + r*groups and s + r*groups.
struct Rows {
  const int8_t* q;
  const float* d;
  const float* s;
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

// The same for one Int8Sym tile: |w| once per chunk, shared by the R rows.
template <class Dot, int R>
inline void int8_tile(const Int8Block* blk, const Rows& x, float* y, int y_stride, int n_valid) {
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int g = 0; g < x.groups; ++g) {
    const Int8Block& b = blk[g];
    __m256i sum[R];
    for (int r = 0; r < R; ++r) sum[r] = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q[c]));
      const __m256i wabs = _mm256_abs_epi8(w);
      for (int r = 0; r < R; ++r) {
        const int8_t* a = x.q + size_t(r) * x.n_in + g * kGroup + 4 * c;
        sum[r] = Dot::dot_s8(sum[r], wabs, w, bcast4(a));
      }
    }
    const __m256 d = load_f16(b.d);
    for (int r = 0; r < R; ++r) {
      const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(x.d[size_t(r) * x.groups + g]));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[r]), dd, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) store_tile(y + size_t(r) * y_stride, acc[r], n_valid);
}

template <class Dot, int R>
inline void tile_rows(const PackedMatrix& w, int t, const Rows& x, float* y, int n_valid) {
  if (w.format == WeightFormat::Int4Asym) {
    int4_tile<Dot, R>(reinterpret_cast<const Int4Block*>(w.tile(t)), x, y, w.n_out, n_valid);
  } else {
    int8_tile<Dot, R>(reinterpret_cast<const Int8Block*>(w.tile(t)), x, y, w.n_out, n_valid);
  }
}

// y[r][t*8 + i] for rows [r0, r1) and tiles [t0, t1): each tile (in L1 after
// its first use) is applied to the rows 4 at a time.
template <class Dot>
void gemm_tiles(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0, int r1, int t0,
                int t1) {
  const int groups = w.n_groups();
  for (int t = t0; t < t1; ++t) {
    const int n_valid = std::min(kTileRows, w.n_out - t * kTileRows);
    for (int r = r0; r < r1; r += 4) {
      const Rows x{qa.q.data() + size_t(r) * w.n_in, qa.d.data() + size_t(r) * groups,
                   qa.s.data() + size_t(r) * groups, w.n_in, groups};
      float* yr = y + size_t(r) * w.n_out + t * kTileRows;
      switch (std::min(4, r1 - r)) {
        case 4: tile_rows<Dot, 4>(w, t, x, yr, n_valid); break;
        case 3: tile_rows<Dot, 3>(w, t, x, yr, n_valid); break;
        case 2: tile_rows<Dot, 2>(w, t, x, yr, n_valid); break;
        default: tile_rows<Dot, 1>(w, t, x, yr, n_valid); break;
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels::x86
