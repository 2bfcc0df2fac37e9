// The x86 float-weight micro-kernels on ymm registers (F16 and Bf16 tiles,
// fp32 activations; layout: packed.h's FloatBlock). Included by gemm_x86.inl,
// so every x86 table compiles its own copy with its own flags.
//
// A tile is its 8 rows transposed: the 8 values of input e are 16 contiguous
// bytes that convert into the 8 lanes of a ymm, one lane an output. Each lane
// accumulates fma(w[e], x[e], acc) over e in order -- the scalar twin's
// arithmetic (gemm_float_ref), so the results are bit-identical to it.
//
// Micro-kernel: R activation rows x NT tiles, R * NT accumulators + NT
// converted weights + a broadcast. GEMM: R = 4 rows x 2 tiles (8 chains, the
// FMA latency x throughput of current cores; 11 registers); per input 2 loads
// and conversions feed 8 FMAs. GEMV: 1 row x 4 tiles, memory bound (2 bytes a
// weight, 64 contiguous bytes an input across the 4 streams).
#include <algorithm>
#include <cassert>

#include "dispatch.h"

namespace tern::kernels::x86 {
namespace {

// 8 fp16 values at p in the 8 fp32 lanes (vcvtph2ps).
struct F16Lanes {
  static __m256 load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
// 8 bfloat16 values at p in the 8 fp32 lanes: zero-extend, shift left 16.
struct Bf16Lanes {
  static __m256 load(const uint16_t* p) {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
};

// y[r][j*8 + i] (row stride y_stride) for R rows of x (row stride n_in) and the
// NT tiles whose blocks start at tile (one tile every `groups` blocks); the
// last tile keeps only n_valid_last lanes. `ahead`: prefetch distance in
// blocks (0: none).
template <class Lanes, int R, int NT>
inline void float_tiles(const FloatBlock* tile, int groups, const float* x, int n_in, float* y,
                        int y_stride, int n_valid_last, int ahead) {
  __m256 acc[R][NT];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NT; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    if (ahead > 0) {
      for (int j = 0; j < NT; ++j)
        prefetch_ahead(tile + size_t(j) * groups + g, ahead, int(sizeof(FloatBlock) / 64));
    }
    const float* xg = x + g * kGroup;
    for (int k = 0; k < kGroup; ++k) {
      __m256 w[NT];
      for (int j = 0; j < NT; ++j) w[j] = Lanes::load(tile[size_t(j) * groups + g].w[k]);
      for (int r = 0; r < R; ++r) {
        const __m256 a = _mm256_broadcast_ss(xg + size_t(r) * n_in + k);
        for (int j = 0; j < NT; ++j) acc[r][j] = _mm256_fmadd_ps(w[j], a, acc[r][j]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NT; ++j)
      store_tile(y + size_t(r) * y_stride + j * kTileRows, acc[r][j],
                 j == NT - 1 ? n_valid_last : kTileRows);
}

// Tiles [t, t + nt) (nt <= NT) for R rows: the NT-wide kernel, or a narrower one.
template <class Lanes, int R, int NT>
inline void float_tiles_upto(const PackedMatrix& w, int t, int nt, const float* x, float* y,
                             int ahead) {
  const int n_valid_last = std::min(kTileRows, w.n_out - (t + nt - 1) * kTileRows);
  const auto* tile = reinterpret_cast<const FloatBlock*>(w.tile(t));
  if constexpr (NT > 1) {
    if (nt < NT) return float_tiles_upto<Lanes, R, NT - 1>(w, t, nt, x, y, ahead);
  }
  float_tiles<Lanes, R, NT>(tile, w.n_groups(), x, w.n_in, y, w.n_out, n_valid_last, ahead);
}

// Rows [r0, r1) x tiles [t0, t1) with R-row kernels, then fewer rows.
template <class Lanes, int R, int NT>
inline void float_rows(const PackedMatrix& w, const float* x, float* y, int r0, int r1, int t0,
                       int t1, int ahead) {
  int r = r0;
  for (; r + R <= r1; r += R) {
    for (int t = t0; t < t1; t += NT) {
      float_tiles_upto<Lanes, R, NT>(w, t, std::min(NT, t1 - t), x + size_t(r) * w.n_in,
                                     y + size_t(r) * w.n_out + t * kTileRows, ahead);
    }
  }
  if constexpr (R > 1) {
    if (r < r1) float_rows<Lanes, R - 1, NT>(w, x, y, r, r1, t0, t1, ahead);
  }
}

// The KernelTable's gemm_tiles for F16 / Bf16 weights on ymm registers.
template <class Lanes>
void float_gemm(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0, int r1, int t0,
                int t1) {
  assert(qa.x != nullptr);
  if (r1 - r0 == 1) {
    // 512-byte blocks: half the int8 GEMV's distance in blocks is about its distance in bytes.
    float_rows<Lanes, 1, 4>(w, qa.x, y, r0, r1, t0, t1, g_gemv_prefetch / 2);
    return;
  }
  float_rows<Lanes, 4, 2>(w, qa.x, y, r0, r1, t0, t1, 0);
}

// F16 or Bf16 weights: float_gemm with the format's conversion.
inline void float_gemm_tiles(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0,
                             int r1, int t0, int t1) {
  if (w.format == WeightFormat::F16) return float_gemm<F16Lanes>(w, qa, y, r0, r1, t0, t1);
  float_gemm<Bf16Lanes>(w, qa, y, r0, r1, t0, t1);
}

}  // namespace
}  // namespace tern::kernels::x86
