// AVX2 + FMA twin of low_rank_b_ref (gemm_jobs.cpp): z = B u for a low-rank
// up-projection in LowRankB's layout, u in fp32. Bit-identical to the twin:
// per output and group of 32 along the rank, s = fma(q_k, u_k, s) in k order,
// then acc = fma(s, d, acc).
//
// One k step of a tile is 8 int8 values (the tile's 8 outputs) widened to 8
// fp32 lanes and multiplied by a broadcast u_k: no horizontal sums. Decode
// with one row per adapter is a chain of `rank` dependent fmas per tile, so
// a single row runs 4 tiles side by side (4 independent chains, one
// broadcast shared); several rows run 4 rows of one tile (the widened values
// shared).
#include <immintrin.h>

#include <algorithm>

#include "tern/kernels/gemm_jobs.h"

namespace tern::kernels::avx2 {
namespace {

inline __m256 widen(const int8_t* q) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
}

// z for R rows x T tiles starting at tile t (all of them whole or the last).
template <int R, int T>
void block(const LowRankB& b, const float* u, int u_stride, float* z, int t) {
  const int rank = b.rank, groups = b.n_rank_groups();
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    __m256 s[R][T];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < T; ++j) s[r][j] = _mm256_setzero_ps();
    const int k1 = std::min(rank, (g + 1) * kGroup);
    for (int k = g * kGroup; k < k1; ++k) {
      __m256 w[T];
      for (int j = 0; j < T; ++j) w[j] = widen(b.q.data() + (size_t(t + j) * rank + k) * kTileRows);
      for (int r = 0; r < R; ++r) {
        const __m256 x = _mm256_broadcast_ss(u + size_t(r) * u_stride + k);
        for (int j = 0; j < T; ++j) s[r][j] = _mm256_fmadd_ps(w[j], x, s[r][j]);
      }
    }
    for (int j = 0; j < T; ++j) {
      const __m256 d = _mm256_load_ps(b.d.data() + (size_t(t + j) * groups + g) * kTileRows);
      for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(s[r][j], d, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < T; ++j) {
      const int o = (t + j) * kTileRows, n = std::min(kTileRows, b.n_out - o);
      float* dst = z + size_t(r) * b.n_out + o;
      if (n == kTileRows) {
        _mm256_storeu_ps(dst, acc[r][j]);
      } else {
        alignas(32) float tmp[kTileRows];
        _mm256_store_ps(tmp, acc[r][j]);
        std::copy_n(tmp, n, dst);
      }
    }
  }
}

}  // namespace

void low_rank_b(const LowRankB& b, const float* u, int u_stride, int rows, float* z) {
  const int tiles = b.n_tiles();
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    for (int t = 0; t < tiles; ++t)
      block<4, 1>(b, u + size_t(r) * u_stride, u_stride, z + size_t(r) * b.n_out, t);
  }
  for (; r < rows; ++r) {
    const float* ur = u + size_t(r) * u_stride;
    float* zr = z + size_t(r) * b.n_out;
    int t = 0;
    for (; t + 4 <= tiles; t += 4) block<1, 4>(b, ur, u_stride, zr, t);
    for (; t < tiles; ++t) block<1, 1>(b, ur, u_stride, zr, t);
  }
}

}  // namespace tern::kernels::avx2
