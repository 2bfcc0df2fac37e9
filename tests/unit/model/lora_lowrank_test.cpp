// The adapters' low-rank kernels (kernels/gemm_jobs.h): LowRankB's and
// LowRankU's rounding, the dispatched B u kernel against its scalar twin
// (bit-identical: exact integer sums, same fma order), and gemm_jobs' fused
// A x -> B u terms against the same steps run one at a time.
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
         float(p.q[((size_t(t) * p.rank_pairs() + k / 2) * kTileRows + i) * 2 + k % 2]);
}

TEST(LowRankB, PackingErrorIsAtMostHalfAStepOfEachGroup) {
  for (int rank : {1, 7, 16, 32, 40, 64}) {
    const int n_out = 29;  // a partial last tile
    auto b = randn(size_t(n_out) * rank, uint32_t(rank), 0.01f);
    b[3] = 0.5f;  // one large value: its group's step grows, the others' do not
    const LowRankB p = pack_low_rank_b(b.data(), n_out, rank);
    EXPECT_EQ(p.bytes(),
              size_t(p.n_tiles()) * kTileRows * (2 * p.rank_pairs() + 4 * p.n_rank_groups()));
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
        const auto uf = randn(size_t(rows) * rank, uint32_t(rows));
        const int stride = 2 * p.rank_pairs();
        // Unaligned: u's int16 rows start one element past an aligned buffer.
        std::vector<int16_t> ubuf(size_t(rows) * stride + 1);
        std::vector<float> ud(static_cast<size_t>(rows));
        const LowRankU u{ubuf.data() + 1, ud.data(), stride};
        quantize_low_rank_u(uf.data(), rows, rank, u);
        for (int r = 0; r < rows; ++r) {
          double amax = 0;
          for (int k = 0; k < rank; ++k)
            amax = std::max(amax, double(std::fabs(uf[size_t(r) * rank + k])));
          for (int k = 0; k < rank; ++k) {
            const double err = std::fabs(double(ud[size_t(r)]) * u.q[size_t(r) * stride + k] -
                                         uf[size_t(r) * rank + k]);
            // Half a step, plus the fp32 product u * (32767 / amax) rounding by up to
            // ~2 ulp at 32767 (2^-9 each): 0.004 of a step.
            ASSERT_LE(err, amax / 65534 * (1 + 1e-2)) << "u to int16";
          }
          if (rank % 2) ASSERT_EQ(u.q[size_t(r) * stride + rank], 0) << "odd rank's pad";
        }
        std::vector<int> dst(static_cast<size_t>(rows));
        std::vector<float> scale(static_cast<size_t>(rows));
        for (int r = 0; r < rows; ++r) {
          dst[size_t(r)] = rows - 1 - r;  // any order
          scale[size_t(r)] = 0.5f + 0.25f * float(r);
        }
        const auto y0 = randn(size_t(rows) * n_out, 7);
        // All tiles, then a middle range (a tail tile only when it is the last).
        for (auto [t0, t1] : {std::pair{0, p.n_tiles()}, std::pair{p.n_tiles() / 3, p.n_tiles()}}) {
          std::vector<float> want = y0, got = y0;
          low_rank_b_add_ref(p, u, rows, dst.data(), scale.data(), want.data(), t0, t1);
          low_rank_b_add(p, u, rows, dst.data(), scale.data(), got.data(), t0, t1);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
              << "rank " << rank << " n_out " << n_out << " rows " << rows << " t0 " << t0;
          // And the twin adds scale * B u up to fp32 rounding of the stored values.
          for (int r = 0; r < rows; ++r) {
            for (int o = 0; o < n_out; ++o) {
              const size_t at = size_t(dst[size_t(r)]) * n_out + o;
              if (o < t0 * kTileRows) {
                ASSERT_EQ(want[at], y0[at]) << "outside the tiles";
                continue;
              }
              double exact = 0, mag = 0;
              for (int k = 0; k < rank; ++k) {
                const double v =
                    double(stored(p, o, k)) * ud[size_t(r)] * u.q[size_t(r) * stride + k];
                exact += v;
                mag += std::fabs(v);
              }
              exact = y0[at] + scale[size_t(r)] * exact;
              ASSERT_NEAR(want[at], exact, 1e-6 * (rank + 2) * (mag + std::fabs(y0[at])));
            }
          }
        }
      }
    }
  }
}

TEST(GemmJobs, FusedLowRankTermsEqualTheStepsRunAlone) {
  TaskPool pool(2);
  const int n_in = 96, n_out = 52, T = 37;  // 37 rows: three 16-row u tasks
  const auto wf = randn(size_t(n_out) * n_in, 1), x = randn(size_t(T) * n_in, 4);
  const PackedMatrix w = pack_matrix(DType::F32, wf.data(), n_out, n_in, WeightFormat::Int4Asym);
  QuantizedActs qa;
  quantize_activations(x.data(), T, n_in, qa, pool);
  // Three low-rank terms (ranks 16, 40, 24) on overlapping rows: [5, 37),
  // then [0, 37) twice (those two share their u tasks).
  struct Ad {
    PackedMatrix a;
    LowRankB b;
    int r0;
  };
  std::vector<Ad> ads;
  for (int rank : {16, 40, 24}) {
    const auto af = randn(size_t(rank) * n_in, uint32_t(rank)), bf = randn(size_t(n_out) * rank, 3);
    ads.push_back({pack_matrix(DType::F32, af.data(), rank, n_in, WeightFormat::Int8Sym),
                   pack_low_rank_b(bf.data(), n_out, rank), rank == 16 ? 5 : 0});
  }
  std::vector<int> dst(static_cast<size_t>(T));
  std::vector<float> scale(static_cast<size_t>(T));
  for (int r = 0; r < T; ++r) {
    dst[size_t(r)] = r;
    scale[size_t(r)] = 1.0f + 0.125f * float(r % 5);
  }
  // Alone: y = x W^T, then each adapter's u = x A^T and y += s B u, in order.
  std::vector<float> want(size_t(T) * n_out);
  matmul(w, qa, want.data(), pool);
  for (const Ad& ad : ads) {
    std::vector<float> u(size_t(T) * ad.b.rank), ud(static_cast<size_t>(T));
    std::vector<int16_t> uq(size_t(T) * ad.b.rank);
    matmul(ad.a, qa, u.data(), pool);
    const LowRankU q{uq.data(), ud.data(), ad.b.rank};
    quantize_low_rank_u(u.data(), T, ad.b.rank, q);
    const size_t r0 = size_t(ad.r0);
    low_rank_b_add(ad.b, {q.q + r0 * q.stride, q.d + r0, q.stride}, T - ad.r0, dst.data() + r0,
                   scale.data() + r0, want.data(), 0, ad.b.n_tiles());
  }
  // Fused, in one dispatch.
  std::vector<float> y(want.size(), NAN);
  const GemmJob gj{&w, &qa, 0, T, y.data()};
  std::vector<std::vector<float>> u(ads.size()), ud(ads.size());
  std::vector<std::vector<int16_t>> uq(ads.size());
  std::vector<LowRankPart> parts;
  for (size_t i = 0; i < ads.size(); ++i) {
    const int rank = ads[i].b.rank;
    u[i].resize(size_t(T) * rank);
    uq[i].resize(size_t(T) * rank);
    ud[i].resize(size_t(T));
    const LowRankU q{uq[i].data(), ud[i].data(), rank};
    parts.push_back(
        {0, &ads[i].a, &ads[i].b, ads[i].r0, T, u[i].data(), q, dst.data(), scale.data()});
  }
  // Many times: whether a base task finds every u ready (and adds the terms
  // itself) or leaves them to a sweeper depends on timing; both must give
  // the same numbers.
  for (int rep = 0; rep < 300; ++rep) {
    std::fill(y.begin(), y.end(), NAN);
    gemm_jobs({&gj, 1}, &qa, parts, pool);
    ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float))) << "rep " << rep;
  }
}

}  // namespace
}  // namespace tern::kernels
