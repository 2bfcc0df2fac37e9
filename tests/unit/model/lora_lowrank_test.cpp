// The adapters' low-rank kernels (kernels/gemm_jobs.h): LowRankB's packing
// error, the dispatched B u kernel against its scalar twin (bit-identical:
// same fma order), and gemm_jobs' fused A x -> B u tasks against the same
// steps run one at a time.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "tern/core/task_pool.h"
#include "tern/kernels/gemm_jobs.h"
#include "tern/kernels/ops.h"

namespace tern::kernels {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

// The value B's packing stores for (o, k).
float stored(const LowRankB& p, int o, int k) {
  const int t = o / kTileRows, i = o % kTileRows, g = k / kGroup;
  return p.d[(size_t(t) * p.n_rank_groups() + g) * kTileRows + i] *
         float(p.q[(size_t(t) * p.rank + k) * kTileRows + i]);
}

TEST(LowRankB, PackingErrorIsAtMostHalfAStepOfEachGroup) {
  for (int rank : {1, 7, 16, 32, 40, 64}) {
    const int n_out = 29;  // a partial last tile
    auto b = randn(size_t(n_out) * rank, uint32_t(rank), 0.01f);
    b[3] = 0.5f;  // one large value: its group's step grows, the others' do not
    const LowRankB p = pack_low_rank_b(b.data(), n_out, rank);
    EXPECT_EQ(p.bytes(), size_t(p.n_tiles()) * kTileRows * (rank + 4 * p.n_rank_groups()));
    for (int o = 0; o < n_out; ++o) {
      for (int g = 0; g * kGroup < rank; ++g) {
        const int k1 = std::min(rank, (g + 1) * kGroup);
        double amax = 0;
        for (int k = g * kGroup; k < k1; ++k)
          amax = std::max(amax, double(std::fabs(b[size_t(o) * rank + k])));
        for (int k = g * kGroup; k < k1; ++k) {
          const double err = std::fabs(double(stored(p, o, k)) - b[size_t(o) * rank + k]);
          ASSERT_LE(err, amax / 254 * (1 + 1e-5)) << "rank " << rank << " o " << o << " k " << k;
        }
      }
    }
    for (int t = n_out; t < p.n_tiles() * kTileRows; ++t) {  // padding rows are zero
      for (int k = 0; k < rank; ++k) ASSERT_EQ(stored(p, t, k), 0.0f);
    }
  }
}

TEST(LowRankB, DispatchedKernelMatchesTheScalarTwinBitForBit) {
  for (int rank : {1, 5, 16, 33, 64}) {
    for (int n_out : {8, 13, 40, 576}) {
      const auto b = randn(size_t(n_out) * rank, uint32_t(rank * 1000 + n_out));
      const LowRankB p = pack_low_rank_b(b.data(), n_out, rank);
      for (int rows : {1, 4, 7}) {
        const int stride = rank + 3;
        // Unaligned: u starts one float past an aligned buffer.
        auto ubuf = randn(size_t(rows) * stride + 1, uint32_t(rows));
        const float* u = ubuf.data() + 1;
        std::vector<float> want(size_t(rows) * n_out), got(want.size(), NAN);
        low_rank_b_ref(p, u, stride, rows, want.data());
        low_rank_b(p, u, stride, rows, got.data());
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << "rank " << rank << " n_out " << n_out << " rows " << rows;
        // And the twin computes B u up to fp32 rounding of the stored values.
        for (int r = 0; r < rows; ++r) {
          for (int o = 0; o < n_out; ++o) {
            double exact = 0, mag = 0;
            for (int k = 0; k < rank; ++k) {
              exact += double(stored(p, o, k)) * u[size_t(r) * stride + k];
              mag += std::fabs(double(stored(p, o, k)) * u[size_t(r) * stride + k]);
            }
            ASSERT_NEAR(want[size_t(r) * n_out + o], exact, 1e-6 * rank * mag + 1e-30);
          }
        }
      }
    }
  }
}

TEST(GemmJobs, FusedLowRankTasksEqualTheStepsRunAlone) {
  TaskPool pool(2);
  const int n_in = 96, n_out = 52, rank = 16, T = 37;  // 37 rows: three 16-row tasks
  const auto wf = randn(size_t(n_out) * n_in, 1), af = randn(size_t(rank) * n_in, 2);
  const auto bf = randn(size_t(n_out) * rank, 3), x = randn(size_t(T) * n_in, 4);
  const PackedMatrix w = pack_matrix(DType::F32, wf.data(), n_out, n_in, WeightFormat::Int4Asym);
  const PackedMatrix a = pack_matrix(DType::F32, af.data(), rank, n_in, WeightFormat::Int8Sym);
  const LowRankB b = pack_low_rank_b(bf.data(), n_out, rank);
  QuantizedActs qa;
  quantize_activations(x.data(), T, n_in, qa, pool);
  // Alone: y = x W^T, u = x A^T, z = B u over rows 5..36.
  std::vector<float> y_want(size_t(T) * n_out), u_want(size_t(T) * rank);
  matmul(w, qa, y_want.data(), pool);
  matmul(a, qa, u_want.data(), pool);
  const int r0 = 5;
  std::vector<float> z_want(size_t(T - r0) * n_out);
  low_rank_b(b, u_want.data() + size_t(r0) * rank, rank, T - r0, z_want.data());
  // Fused, with a second low-rank job over rows 0..4 of the same scratch.
  std::vector<float> y(y_want.size(), NAN), u(u_want.size(), NAN), z(z_want.size(), NAN);
  std::vector<float> z0(size_t(r0) * n_out, NAN);
  const GemmJob gj{&w, &qa, 0, T, y.data()};
  const LowRankJob lj[2] = {{&a, &b, &qa, r0, T, u.data(), z.data()},
                            {&a, &b, &qa, 0, r0, u.data(), z0.data()}};
  gemm_jobs({&gj, 1}, lj, pool);
  EXPECT_EQ(0, std::memcmp(y.data(), y_want.data(), y.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(u.data(), u_want.data(), u.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(z.data(), z_want.data(), z.size() * sizeof(float)));
  std::vector<float> z0_want(z0.size());
  low_rank_b(b, u_want.data(), rank, r0, z0_want.data());
  EXPECT_EQ(0, std::memcmp(z0.data(), z0_want.data(), z0.size() * sizeof(float)));
}

}  // namespace
}  // namespace tern::kernels
