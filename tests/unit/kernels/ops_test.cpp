// The element-wise and attention kernels of every fast table against the
// scalar reference, on odd lengths and unaligned pointers. Tolerances follow
// from the inputs: a few ulp of each output for the exp-based kernels, and for
// attention a few ulp of the largest |v| (the output is a convex combination
// of the v rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
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
      for (int i = 0; i < n; ++i)
        ASSERT_NEAR(x.data()[i], want.data()[i], 2 * kUlp * std::fabs(want.data()[i]));
    }
  }
}

TEST(Ops, SwigluMatchesScalar) {
  std::mt19937 rng(2);
  for (const KernelTable* k : fast_tables()) {
    for (const int n : {1, 5, 8, 13, 1536}) {
      Floats g(n, 1, rng, 4.0f), u(n, 2, rng), want(n, 0, rng), got(n, 3, rng);
      g.data()[0] = 100.0f;              // exp(-g) underflows
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

// gelu_tanh in double, for the reference itself.
double gelu_tanh(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

TEST(Ops, GegluReferenceIsGeluTanhTimesUp) {
  const float g[] = {-6.0f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 3.0f};
  const float u[] = {1.0f, 2.0f, -1.0f, 5.0f, 1.0f, -0.5f, 0.25f};
  float out[7];
  scalar_kernels().geglu(g, u, out, 7);
  for (int i = 0; i < 7; ++i) {
    const double want = gelu_tanh(g[i]) * u[i];
    // The tanh form loses absolute accuracy near 1 + tanh = 0: ulps of |g u|.
    EXPECT_NEAR(out[i], want, 4 * kUlp * std::fabs(g[i] * u[i])) << g[i];
  }
  EXPECT_NEAR(gelu_tanh(1.0), 0.8411920, 1e-7);  // the formula itself (PyTorch's value)
}

// The encoders' portable ops against double-precision formulas: LayerNorm
// (mean 0, variance 1 before the affine part; in place too) and the
// ungated gelu_tanh.
TEST(Ops, LayerNormAndGelu) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.5f, 2.0f);
  for (const int n : {1, 7, 128, 1001}) {
    const size_t len = static_cast<size_t>(n);
    std::vector<float> in(len), wt(len), bias(len), out(len);
    for (size_t i = 0; i < in.size(); ++i) {
      in[i] = dist(rng);
      wt[i] = dist(rng);
      bias[i] = dist(rng);
    }
    double mean = 0, var = 0;
    for (float v : in) mean += v;
    mean /= n;
    for (float v : in) var += (v - mean) * (v - mean);
    var /= n;
    const float eps = 1e-12f;
    layernorm(in.data(), wt.data(), bias.data(), out.data(), n, eps);
    for (size_t i = 0; i < in.size(); ++i) {
      const double want = (in[i] - mean) / std::sqrt(var + eps) * wt[i] + bias[i];
      ASSERT_NEAR(out[i], want, 1e-5 * (std::fabs(want) + std::fabs(wt[i]) + 1)) << n;
    }
    layernorm(in.data(), wt.data(), bias.data(), in.data(), n, eps);  // in place
    EXPECT_EQ(in, out);
  }
  std::vector<float> g = {-100.0f, -6.0f, -1.0f, 0.0f, 0.5f, 3.0f, 100.0f};
  const std::vector<float> before = g;
  gelu(g.data(), int(g.size()));
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], gelu_tanh(before[i]), 4 * kUlp * std::fabs(before[i]) + 1e-30) << before[i];
}

TEST(Ops, GegluMatchesScalar) {
  std::mt19937 rng(5);
  for (const KernelTable* k : fast_tables()) {
    for (const int n : {1, 5, 8, 13, 31, 1536}) {
      Floats g(n, 1, rng, 3.0f), u(n, 2, rng), want(n, 0, rng), got(n, 3, rng);
      g.data()[0] = 100.0f;              // e^(-2u) underflows: gelu -> x
      if (n > 1) g.data()[1] = -100.0f;  // e^(-2u) overflows: gelu -> -0
      if (n > 2) g.data()[2] = -6.0f;    // 1 + tanh(u) nearly cancels in the reference
      scalar_kernels().geglu(g.data(), u.data(), want.data(), n);
      k->geglu(g.data(), u.data(), got.data(), n);
      for (int i = 0; i < n; ++i) {
        // A few ulp of the result (the exp), plus ulps of |gate * up| for the
        // reference's cancellation in 1 + tanh (|gelu(x)| <= |x|).
        const float gu = std::fabs(g.data()[i] * u.data()[i]);
        ASSERT_NEAR(got.data()[i], want.data()[i],
                    4 * kUlp * (std::fabs(want.data()[i]) + gu) + 1e-30f)
            << k->isa << " n " << n << " g " << g.data()[i];
      }
    }
  }
}

TEST(Ops, AttentionMatchesScalar) {
  std::mt19937 rng(6);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  struct Case {
    int head_dim, n_tok, n_grp, n_kv0;
  };
  const Case cases[] = {{64, 1, 1, 1}, {64, 1, 3, 9},  {64, 12, 3, 1}, {64, 5, 3, 60},
                        {8, 3, 2, 7},  {24, 9, 4, 17}, {72, 2, 1, 33}, {128, 4, 8, 100},
                        {36, 3, 2, 5}, {256, 2, 2, 8}, {64, 40, 1, 3}, {128, 1, 40, 20}};
  for (const KernelTable* k : fast_tables()) {
    for (const Case& cs : cases) {
      const int hd = cs.head_dim, n_kv = cs.n_kv0 + cs.n_tok - 1;
      const int64_t kv_stride = 3 * hd + 5;  // other heads between rows; odd
      const int64_t q_stride = int64_t(cs.n_grp) * hd + 3;
      std::vector<uint16_t> kc(size_t(n_kv * kv_stride + 1)), vc(size_t(n_kv * kv_stride + 1));
      float vmax = 0, kmax = 0;
      for (size_t i = 0; i < kc.size(); ++i) {
        kc[i] = f32_to_fp16(dist(rng));
        vc[i] = f32_to_fp16(dist(rng));
        kmax = std::max(kmax, std::fabs(fp16_to_f32(kc[i])));
        vmax = std::max(vmax, std::fabs(fp16_to_f32(vc[i])));
      }
      const int nq = int(cs.n_tok * q_stride);
      Floats q(nq, 1, rng, 1.5f), want(nq, 0, rng), got(nq, 1, rng);
      const std::vector<float> before(got.data(), got.data() + nq);
      // Offset by one element: unaligned fp16 rows.
      scalar_kernels().attention_f16(q.data(), want.data(), q_stride, cs.n_tok, cs.n_grp, cs.n_kv0,
                                     kc.data() + 1, vc.data() + 1, kv_stride, hd);
      k->attention_f16(q.data(), got.data(), q_stride, cs.n_tok, cs.n_grp, cs.n_kv0, kc.data() + 1,
                       vc.data() + 1, kv_stride, hd);
      for (int i = 0; i < cs.n_tok; ++i) {
        for (int g = 0; g < cs.n_grp; ++g) {
          const float* qi = q.data() + i * q_stride + g * hd;
          // Scores differ by the order of their sums: up to head_dim * ulp of
          // sum|q||k|; a score error e scales the weights by about (1 +- e).
          float q_abs = 0;
          for (int j = 0; j < hd; ++j) q_abs += std::fabs(qi[j]);
          const float score_err = float(hd) * kUlp * q_abs * kmax;
          for (int j = 0; j < hd; ++j) {
            const int64_t o = i * q_stride + g * hd + j;
            ASSERT_NEAR(got.data()[o], want.data()[o], (16 * kUlp + 4 * score_err) * vmax)
                << k->isa << " head_dim " << hd << " token " << i << " head " << g;
          }
        }
        // The padding between query rows is left alone.
        for (int64_t o = int64_t(cs.n_grp) * hd; o < q_stride; ++o) {
          ASSERT_EQ(got.data()[i * q_stride + o], before[size_t(i * q_stride + o)]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels
