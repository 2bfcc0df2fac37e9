// The element-wise and attention kernels of every fast table against the
// scalar reference, on odd lengths and unaligned pointers. Tolerances follow
// from the inputs: a few ulp of each output for the exp-based kernels, and for
// attention a few ulp of the largest |v| (the output is a convex combination
// of the v rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tern/core/half.h"
#include "test_tables.h"

namespace tern::kernels {
namespace {

using test::fast_tables;
using test::Floats;

constexpr float kUlp = 1.0f / (1 << 23);

TEST(Ops, RmsNormMatchesScalar) {
  std::mt19937 rng(1);
  for (const KernelTable* k : fast_tables()) {
    for (const int n : {1, 7, 8, 9, 64, 576, 1001}) {
      Floats x(n, 1, rng, 3.0f), w(n, 3, rng), want(n, 0, rng), got(n, 5, rng);
      scalar_kernels().rmsnorm(x.data(), w.data(), want.data(), n, 1e-5f);
      k->rmsnorm(x.data(), w.data(), got.data(), n, 1e-5f);
      for (int i = 0; i < n; ++i) {
        ASSERT_NEAR(got.data()[i], want.data()[i], 2 * kUlp * std::fabs(want.data()[i]))
            << k->isa << " n " << n << " i " << i;
      }
      // In place, as the forward pass uses it for q/k norms.
      k->rmsnorm(x.data(), w.data(), x.data(), n, 1e-5f);
      for (int i = 0; i < n; ++i) ASSERT_NEAR(x.data()[i], want.data()[i], 2 * kUlp * std::fabs(want.data()[i]));
    }
  }
}

TEST(Ops, SwigluMatchesScalar) {
  std::mt19937 rng(2);
  for (const KernelTable* k : fast_tables()) {
    for (const int n : {1, 5, 8, 13, 1536}) {
      Floats g(n, 1, rng, 4.0f), u(n, 2, rng), want(n, 0, rng), got(n, 3, rng);
      g.data()[0] = 100.0f;  // exp(-g) underflows
      if (n > 1) g.data()[1] = -100.0f;  // exp(-g) overflows: silu -> -0
      scalar_kernels().swiglu(g.data(), u.data(), want.data(), n);
      k->swiglu(g.data(), u.data(), got.data(), n);
      for (int i = 0; i < n; ++i) {
        ASSERT_NEAR(got.data()[i], want.data()[i], 4 * kUlp * std::fabs(want.data()[i]) + 1e-30f)
            << k->isa << " g " << g.data()[i];
      }
    }
  }
}

TEST(Ops, SoftmaxMatchesScalar) {
  std::mt19937 rng(3);
  for (const KernelTable* k : fast_tables()) {
    for (const int n : {1, 3, 8, 17, 1000}) {
      Floats x(n, 1, rng, 5.0f);
      std::vector<float> want(x.data(), x.data() + n);
      scalar_kernels().softmax(want.data(), n);
      k->softmax(x.data(), n);
      double sum = 0;
      for (int i = 0; i < n; ++i) {
        ASSERT_NEAR(x.data()[i], want[size_t(i)], 4 * kUlp * want[size_t(i)] + 1e-37f) << k->isa;
        sum += x.data()[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

TEST(Ops, F32ToF16MatchesScalarBitForBit) {
  std::mt19937 rng(4);
  for (const KernelTable* k : fast_tables()) {
    for (const int n : {1, 7, 8, 9, 192, 385}) {
      Floats x(n, 1, rng, 100.0f);
      x.data()[0] = 65520.0f;  // rounds to inf
      if (n > 2) x.data()[1] = 1e-7f, x.data()[2] = -3e-5f;  // subnormal fp16
      std::vector<uint16_t> want(size_t(n) + 1), got(size_t(n) + 1);
      scalar_kernels().f32_to_f16(x.data(), want.data(), n);
      k->f32_to_f16(x.data(), got.data() + 1, n);  // unaligned destination
      ASSERT_EQ(std::memcmp(want.data(), got.data() + 1, size_t(n) * 2), 0) << k->isa << " n " << n;
    }
  }
}

TEST(Ops, AttentionMatchesScalar) {
  std::mt19937 rng(6);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const KernelTable* k : fast_tables()) {
    for (const int head_dim : {8, 24, 64, 72, 128, 36}) {
      for (const int n_kv : {1, 2, 7, 8, 9, 33, 200}) {
        const int64_t stride = 3 * head_dim + 5;  // other heads between rows; odd
        std::vector<uint16_t> kc(size_t(n_kv * stride + 1)), vc(size_t(n_kv * stride + 1));
        float vmax = 0, kmax = 0;
        for (size_t i = 0; i < kc.size(); ++i) {
          kc[i] = f32_to_fp16(dist(rng));
          kmax = std::max(kmax, std::fabs(fp16_to_f32(kc[i])));
          const float v = dist(rng);
          vc[i] = f32_to_fp16(v);
          vmax = std::max(vmax, std::fabs(fp16_to_f32(vc[i])));
        }
        Floats q(head_dim, 1, rng, 1.5f), want(head_dim, 0, rng), got(head_dim, 1, rng);
        // Offset by one element: unaligned fp16 rows.
        scalar_kernels().attention_f16(q.data(), kc.data() + 1, vc.data() + 1, n_kv, head_dim,
                                       stride, want.data());
        k->attention_f16(q.data(), kc.data() + 1, vc.data() + 1, n_kv, head_dim, stride, got.data());
        // Scores differ by the order of their sums: up to head_dim * ulp of
        // sum|q||k|; a score error e scales the weights by about (1 +- e).
        float q_abs = 0;
        for (int j = 0; j < head_dim; ++j) q_abs += std::fabs(q.data()[j]);
        const float score_err = float(head_dim) * kUlp * q_abs * kmax;
        for (int j = 0; j < head_dim; ++j) {
          ASSERT_NEAR(got.data()[j], want.data()[j], (16 * kUlp + 4 * score_err) * vmax)
              << k->isa << " head_dim " << head_dim << " n_kv " << n_kv << " j " << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels
