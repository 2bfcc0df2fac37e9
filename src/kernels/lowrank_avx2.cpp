// AVX2 twin of low_rank_b_add_ref (gemm_jobs.cpp): y += scale * B u for a
// low-rank up-projection in LowRankB's layout, u int16 (LowRankU).
// Bit-identical to the twin: exact int32 sums per group of 32 along the
// rank, acc = fma(float(sum), d, acc), y = fma(acc, scale * u.d, y).
//
// One pair of inputs of a tile is 16 bytes (the 8 outputs' two values):
// sign-extended to int16 and multiplied against the broadcast u pair by
// vpmaddwd, they give the 8 outputs' partial sums in 8 int32 lanes, added
// up with vpaddd (latency 1: no long dependency chains). A single row runs
// 4 tiles side by side (one broadcast shared); several rows run 4 rows of
// one tile (the widened values shared).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "tern/kernels/gemm_jobs.h"

namespace tern::kernels::avx2 {
namespace {

inline __m256i widen(const int8_t* q) {
  return _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(q)));
}

inline __m256i pair_of(const int16_t* u) {
  int32_t v;
  std::memcpy(&v, u, sizeof v);
  return _mm256_set1_epi32(v);
}

// R rows x T tiles starting at tile t (all of them whole, or the last).
template <int R, int T>
void block(const LowRankB& b, LowRankU u, const int* dst_row, const float* scale, float* y, int t) {
  const int pairs = b.rank_pairs(), groups = b.n_rank_groups();
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < T; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    __m256i s[R][T];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < T; ++j) s[r][j] = _mm256_setzero_si256();
    const int p1 = std::min(pairs, (g + 1) * kGroup / 2);
    for (int p = g * kGroup / 2; p < p1; ++p) {
      __m256i w[T];
      for (int j = 0; j < T; ++j) {
        w[j] = widen(b.q.data() + (size_t(t + j) * pairs + p) * kTileRows * 2);
      }
      for (int r = 0; r < R; ++r) {
        const __m256i x = pair_of(u.q + size_t(r) * u.stride + 2 * p);
        for (int j = 0; j < T; ++j) s[r][j] = _mm256_add_epi32(s[r][j], _mm256_madd_epi16(w[j], x));
      }
    }
    for (int j = 0; j < T; ++j) {
      const __m256 d = _mm256_load_ps(b.d.data() + (size_t(t + j) * groups + g) * kTileRows);
      for (int r = 0; r < R; ++r)
        acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r][j]), d, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m256 sc = _mm256_set1_ps(scale[r] * u.d[r]);
    for (int j = 0; j < T; ++j) {
      const int o = (t + j) * kTileRows, n = std::min(kTileRows, b.n_out - o);
      float* dst = y + size_t(dst_row[r]) * b.n_out + o;
      if (n == kTileRows) {
        _mm256_storeu_ps(dst, _mm256_fmadd_ps(acc[r][j], sc, _mm256_loadu_ps(dst)));
      } else {
        alignas(32) float tmp[kTileRows] = {};
        std::copy_n(dst, n, tmp);
        _mm256_store_ps(tmp, _mm256_fmadd_ps(acc[r][j], sc, _mm256_load_ps(tmp)));
        std::copy_n(tmp, n, dst);
      }
    }
  }
}

}  // namespace

void low_rank_b_add(const LowRankB& b, LowRankU u, int rows, const int* dst_row, const float* scale,
                    float* y, int t0, int t1) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    const LowRankU ur{u.q + size_t(r) * u.stride, u.d + r, u.stride};
    for (int t = t0; t < t1; ++t) block<4, 1>(b, ur, dst_row + r, scale + r, y, t);
  }
  for (; r < rows; ++r) {
    const LowRankU ur{u.q + size_t(r) * u.stride, u.d + r, u.stride};
    int t = t0;
    for (; t + 4 <= t1; t += 4) block<1, 4>(b, ur, dst_row + r, scale + r, y, t);
    for (; t < t1; ++t) block<1, 1>(b, ur, dst_row + r, scale + r, y, t);
  }
}

}  // namespace tern::kernels::avx2
