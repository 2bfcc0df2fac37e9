// Block-attention kernels: scalar and AVX2 against a float64 oracle over the
// decoded rows (odd head_dims and block sizes, unaligned q and out, state
// carried across blocks); the scalar f16 kernel is bit-identical to the
// contiguous reference of kernels::attention_f16; and each quantized type's
// error against unquantized K/V stays within its format's reach.
#include "tern/kv/kv_attend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kv_test_util.h"
#include "tern/core/aligned.h"
#include "tern/core/half.h"
#include "tern/kernels/ops.h"

namespace tern::kv {
namespace {

constexpr KvType kTypes[] = {KvType::F16, KvType::Int8, KvType::Int8Fp8, KvType::Int4Fp8};

// n_ctx tokens of 2 kv heads, encoded into blocks of one layer; keeps the
// float inputs too.
struct Blocks {
  KvLayout L;
  int n_ctx;
  AlignedBuffer<uint8_t> mem;
  std::vector<float> k, v;  // (n_ctx, 2, hd) unquantized

  Blocks(KvType t, int hd, int B, int n, uint32_t seed)
      : L(KvLayout::make(1, 2, hd, B, t)), n_ctx(n) {
    const int nb = (n + B - 1) / B;
    mem = AlignedBuffer<uint8_t>(size_t(nb) * L.block_bytes);
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    k.resize(size_t(n) * 2 * hd);
    v.resize(size_t(n) * 2 * hd);
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = d(rng) * (i % size_t(hd) == 1 ? 6.0f : 1.0f);  // an outlier channel, like real keys
      v[i] = d(rng);
    }
    for (int p = 0; p < n; ++p) {
      uint8_t* slice = mem.data() + size_t(p / B) * L.block_bytes;
      for (int h = 0; h < 2; ++h) {
        encode_token(L, &k[(size_t(p) * 2 + h) * hd], &v[(size_t(p) * 2 + h) * hd],
                     slice + size_t(h) * L.head_bytes, p % B);
      }
    }
  }
  HeadBlock head(int blk, int kvh) const {
    return head_block(L, mem.data() + size_t(blk) * L.block_bytes, kvh);
  }

  // Runs a kernel over all blocks for head kvh.
  void attend(const AttendKernels& K, int kvh, const float* q, float* out) const {
    const int hd = L.head_dim, B = L.block_tokens;
    float m, l;
    std::vector<float> acc(static_cast<size_t>(hd));
    attend_start(hd, &m, &l, acc.data());
    for (int blk = 0; blk * B < n_ctx; ++blk) {
      K.for_type(L.type)(L, head(blk, kvh), std::min(B, n_ctx - blk * B), q, &m, &l, acc.data());
    }
    attend_finish(hd, l, acc.data(), out);
  }

  // float64 softmax attention over rows given by get(p, which, row_out).
  template <typename Get>
  std::vector<double> oracle(const float* q, Get get) const {
    const int hd = L.head_dim;
    std::vector<double> s(static_cast<size_t>(n_ctx)), out(size_t(hd), 0.0);
    std::vector<float> row(static_cast<size_t>(hd));
    double mx = -std::numeric_limits<double>::infinity();
    for (int p = 0; p < n_ctx; ++p) {
      get(p, 0, row.data());
      double d = 0;
      for (int j = 0; j < hd; ++j) d += double(q[j]) * row[size_t(j)];
      s[size_t(p)] = d;
      mx = std::max(mx, d);
    }
    double sum = 0;
    for (int p = 0; p < n_ctx; ++p) {
      const double e = std::exp(s[size_t(p)] - mx);
      sum += e;
      get(p, 1, row.data());
      for (int j = 0; j < hd; ++j) out[size_t(j)] += e * row[size_t(j)];
    }
    for (double& o : out) o /= sum;
    return out;
  }
  std::vector<double> oracle_decoded(int kvh, const float* q) const {
    return oracle(q, [&](int p, int which, float* row) {
      const HeadBlock hb = head(p / L.block_tokens, kvh);
      (which == 0 ? decode_k : decode_v)(L, hb, p % L.block_tokens, row);
    });
  }
  std::vector<double> oracle_float(int kvh, const float* q) const {
    const int hd = L.head_dim;
    return oracle(q, [&](int p, int which, float* row) {
      const float* src = (which == 0 ? k : v).data() + (size_t(p) * 2 + kvh) * hd;
      std::copy_n(src, hd, row);
    });
  }
};

std::vector<float> random_q(int hd, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f / std::sqrt(float(hd)));
  std::vector<float> q(size_t(hd) + 1);
  for (float& x : q) x = d(rng);
  return q;
}

std::vector<const AttendKernels*> all_kernels() {
  return available_attend_kernels();
}

TEST(KvAttend, KernelsMatchFloat64OracleOnOddShapes) {
  for (const AttendKernels* K : all_kernels()) {
    for (KvType t : kTypes) {
      for (int hd : {2, 6, 16, 34, 64, 80, 128}) {
        if (t != KvType::Int4Fp8) hd += hd % 4 == 2 ? 1 : 0;  // odd head_dims where allowed
        for (int B : {1, 5, 32}) {
          for (int n : {1, 9, 70}) {
            const Blocks bl(t, hd, B, n, uint32_t(hd * 1000 + B * 10 + n));
            for (int kvh : {0, 1}) {
              const auto qbuf = random_q(hd, uint32_t(n + kvh));
              const float* q = qbuf.data() + 1;  // unaligned
              std::vector<float> obuf(size_t(hd) + 1);
              float* out = obuf.data() + 1;
              bl.attend(*K, kvh, q, out);
              const auto ref = bl.oracle_decoded(kvh, q);
              double vmax = 0;
              for (float x : bl.v) vmax = std::max(vmax, double(std::fabs(x)));
              // The AVX-512 kernels round each token's weight (probability
              // x value scale) to bf16 (their other types are exact); they,
              // the AVX2 and the NEON kernels score integer keys against the
              // query rounded to 15-bit codes (a score moves by at most half
              // a code step times the key row's L1 norm: ~1e-4 here; NEON's
              // codes reach 32512 instead of 32767, steps 0.8% coarser).
              const std::string isa = K->isa;
              const bool low = isa == "avx512" && t != KvType::F16;
              const bool q15 =
                  (isa == "avx2" || isa == "neon" || isa == "neon-dotprod") && t != KvType::F16;
              const double tol = low ? 2e-2 : q15 ? 3e-4 : 2e-5;
              for (int j = 0; j < hd; ++j) {
                ASSERT_NEAR(out[j], ref[size_t(j)], tol * vmax)
                    << K->isa << " " << to_string(t) << " hd=" << hd << " B=" << B << " n=" << n
                    << " j=" << j;
              }
            }
          }
        }
      }
    }
  }
}

// The multi-row kernels (a GQA group's query rows sharing each decoded key
// and value) give bit-identical results to the one-row kernel run per row,
// for 1..7 rows, odd head sizes and partial blocks.
TEST(KvAttend, MultiRowKernelsAreBitIdenticalToOneRowKernels) {
  for (const AttendKernels* K : all_kernels()) {
    for (KvType t : kTypes) {
      if (!K->rows_for_type(t)) continue;
      for (int hd : {64, 40, 18}) {
        const Blocks b(t, hd, 32, 77, 11 + hd);
        for (int nr = 1; nr <= 7; ++nr) {
          std::vector<std::vector<float>> qs;
          std::vector<const float*> qp;
          for (int r = 0; r < nr; ++r) qs.push_back(random_q(hd, 100 + r));
          for (auto& q : qs) qp.push_back(q.data() + 1);  // unaligned
          std::vector<float> m1(static_cast<size_t>(nr)), l1(static_cast<size_t>(nr)),
              acc1(static_cast<size_t>(nr * hd));
          std::vector<float> m2(static_cast<size_t>(nr)), l2(static_cast<size_t>(nr)),
              acc2(static_cast<size_t>(nr * hd));
          for (int r = 0; r < nr; ++r) {
            attend_start(hd, &m1[size_t(r)], &l1[size_t(r)], &acc1[size_t(r * hd)]);
            attend_start(hd, &m2[size_t(r)], &l2[size_t(r)], &acc2[size_t(r * hd)]);
          }
          for (int blk = 0; blk * 32 < b.n_ctx; ++blk) {
            const int n = std::min(32, b.n_ctx - blk * 32);
            for (int r = 0; r < nr; ++r) {
              K->for_type(t)(b.L, b.head(blk, 1), n, qp[size_t(r)], &m1[size_t(r)], &l1[size_t(r)],
                             &acc1[size_t(r * hd)]);
            }
            K->rows_for_type(t)(b.L, b.head(blk, 1), n, nr, qp.data(), m2.data(), l2.data(),
                                acc2.data());
          }
          EXPECT_EQ(0, std::memcmp(m1.data(), m2.data(), m1.size() * 4))
              << K->isa << " " << to_string(t) << " hd " << hd << " rows " << nr;
          EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), l1.size() * 4))
              << K->isa << " " << to_string(t);
          EXPECT_EQ(0, std::memcmp(acc1.data(), acc2.data(), acc1.size() * 4))
              << K->isa << " " << to_string(t) << " hd " << hd << " rows " << nr;
        }
      }
    }
  }
}

TEST(KvAttend, ScalarF16BlocksAreBitIdenticalToContiguous) {
  for (int hd : {7, 64}) {
    for (int B : {1, 5, 32}) {
      const int n = 77;
      const Blocks bl(KvType::F16, hd, B, n, 99);
      // The plain cache's layout: (n, kv_dim) fp16 rows.
      std::vector<uint16_t> K(size_t(n) * 2 * hd), V(K.size());
      for (size_t i = 0; i < K.size(); ++i)
        K[i] = f32_to_fp16(bl.k[i]), V[i] = f32_to_fp16(bl.v[i]);
      for (int kvh : {0, 1}) {
        const auto q = random_q(hd, 5);
        std::vector<float> paged(static_cast<size_t>(hd)), plain(static_cast<size_t>(hd)),
            dispatched(static_cast<size_t>(hd));
        bl.attend(scalar_attend_kernels(), kvh, q.data(), paged.data());
        test::attention_f16_contiguous(q.data(), K.data() + kvh * hd, V.data() + kvh * hd, n, hd,
                                       2 * hd, plain.data());
        EXPECT_EQ(std::memcmp(paged.data(), plain.data(), sizeof(float) * size_t(hd)), 0)
            << "hd=" << hd << " B=" << B;
        // The engine's own dispatched kernel agrees (bit-exact when it is the scalar one).
        kernels::attention_f16(q.data(), dispatched.data(), 0, 1, 1, n, K.data() + kvh * hd,
                               V.data() + kvh * hd, 2 * hd, hd);
        for (int j = 0; j < hd; ++j) EXPECT_NEAR(dispatched[size_t(j)], paged[size_t(j)], 1e-5f);
      }
    }
  }
}

TEST(KvAttend, QuantizationErrorAgainstFloatKv) {
  // Output error relative to the values' scale, over many random queries.
  // Keys in int8 move scores by ~|q||k|/254, int4 by ~|q||k|/14; fp8 values
  // carry 1/16 relative rounding that averages out over the softmax.
  const struct {
    KvType t;
    double bound;
  } cases[] = {
      {KvType::F16, 2e-3}, {KvType::Int8, 2e-2}, {KvType::Int8Fp8, 4e-2}, {KvType::Int4Fp8, 0.25}};
  for (auto c : cases) {
    double worst = 0;
    for (int trial = 0; trial < 8; ++trial) {
      const Blocks bl(c.t, 64, 32, 200, uint32_t(trial + 1));
      const auto q = random_q(64, uint32_t(trial + 50));
      std::vector<float> out(64);
      bl.attend(active_attend_kernels(), 0, q.data(), out.data());
      const auto ref = bl.oracle_float(0, q.data());
      for (int j = 0; j < 64; ++j)
        worst = std::max(worst, std::fabs(out[size_t(j)] - ref[size_t(j)]));
    }
    EXPECT_LT(worst, c.bound) << to_string(c.t);
    EXPECT_GT(worst, 0.0) << to_string(c.t);  // the comparison really ran on rounded data
  }
}

// Keys with an outlier channel: int4 per-token quantization crushes the other
// channels; rotating keys and queries (same scores in exact arithmetic)
// spreads the outlier and cuts the attention error several fold.
TEST(KvAttend, KeyRotationCutsInt4Error) {
  const int hd = 64, n = 256, B = 32;
  const KvLayout L = KvLayout::make(1, 1, hd, B, KvType::Int4Fp8);
  std::mt19937 rng(4);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> k(size_t(n) * hd), v(size_t(n) * hd), rk(static_cast<size_t>(hd));
  for (size_t i = 0; i < k.size(); ++i) k[i] = d(rng) * (i % hd == 9 ? 10.0f : 1.0f), v[i] = d(rng);
  AlignedBuffer<uint8_t> plain(size_t(n / B) * L.block_bytes), rotated(plain.size());
  for (int p = 0; p < n; ++p) {
    const float* kp = &k[size_t(p) * hd];
    encode_token(L, kp, &v[size_t(p) * hd], plain.data() + size_t(p / B) * L.block_bytes, p % B);
    rotate(kp, hd, rk.data());
    encode_token(L, rk.data(), &v[size_t(p) * hd], rotated.data() + size_t(p / B) * L.block_bytes,
                 p % B);
  }
  auto run = [&](const AlignedBuffer<uint8_t>& mem, const float* q, float* out) {
    float m, l;
    std::vector<float> acc(static_cast<size_t>(hd));
    attend_start(hd, &m, &l, acc.data());
    for (int b = 0; b < n / B; ++b) {
      scalar_attend_kernels().for_type(KvType::Int4Fp8)(
          L, head_block(L, mem.data() + size_t(b) * L.block_bytes, 0), B, q, &m, &l, acc.data());
    }
    attend_finish(hd, l, acc.data(), out);
  };
  double err_plain = 0, err_rot = 0;
  for (int trial = 0; trial < 16; ++trial) {
    auto q = random_q(hd, uint32_t(trial));
    for (int j = 0; j < hd; ++j) q[size_t(j)] *= 2.0f;  // peaky enough that key errors matter
    std::vector<float> rq(static_cast<size_t>(hd)), o1(static_cast<size_t>(hd)),
        o2(static_cast<size_t>(hd));
    rotate(q.data(), hd, rq.data());
    run(plain, q.data(), o1.data());
    run(rotated, rq.data(), o2.data());
    // float64 reference on the unquantized rows
    std::vector<double> s(static_cast<size_t>(n)), ref(static_cast<size_t>(hd), 0.0);
    double mx = -1e300, sum = 0;
    for (int p = 0; p < n; ++p) {
      double dot = 0;
      for (int j = 0; j < hd; ++j) dot += double(q[size_t(j)]) * k[size_t(p) * hd + j];
      s[size_t(p)] = dot;
      mx = std::max(mx, dot);
    }
    for (int p = 0; p < n; ++p) {
      const double e = std::exp(s[size_t(p)] - mx);
      sum += e;
      for (int j = 0; j < hd; ++j) ref[size_t(j)] += e * v[size_t(p) * hd + j];
    }
    for (int j = 0; j < hd; ++j) {
      err_plain = std::max(err_plain, std::fabs(o1[size_t(j)] - ref[size_t(j)] / sum));
      err_rot = std::max(err_rot, std::fabs(o2[size_t(j)] - ref[size_t(j)] / sum));
    }
  }
  EXPECT_LT(err_rot, 0.5 * err_plain) << "plain " << err_plain << " rotated " << err_rot;
}

TEST(KvAttend, EmptyBlockLeavesStateAlone) {
  const Blocks bl(KvType::Int8Fp8, 16, 4, 4, 1);
  for (const AttendKernels* K : all_kernels()) {
    float m = 1.5f, l = 2.0f;
    std::vector<float> acc(16, 3.0f);
    K->for_type(KvType::Int8Fp8)(bl.L, bl.head(0, 0), 0, random_q(16, 1).data(), &m, &l,
                                 acc.data());
    EXPECT_EQ(m, 1.5f);
    EXPECT_EQ(l, 2.0f);
    for (float a : acc) EXPECT_EQ(a, 3.0f);
  }
}

}  // namespace
}  // namespace tern::kv

namespace tern::kv {
namespace {

// A tile (rows of consecutive prompt tokens, each seeing its own number of
// the block's tokens under the causal mask) and a span of such tiles give
// every row bit-identically what that row gets alone — so how a prompt is chunked, batched or
// decoded never changes its numbers — and matches the one-row kernels of the scalar table within
// rounding.
TEST(KvAttend, TileRowsAreBitIdenticalToRowsAlone) {
  for (const AttendKernels* K : all_kernels()) {
    for (KvType t : kTypes) {
      const AttendTileFn tile = K->tile_for_type(t);
      if (!tile) continue;
      for (int hd : {64, 40, 18, 128, 256}) {
        const Blocks b(t, hd, 32, 90, 7 + hd);
        for (int nr : {1, 3, 17, kMaxTileRows}) {
          std::mt19937 rng(uint32_t(nr * 31 + hd));
          std::vector<std::vector<float>> qs;
          std::vector<const float*> qp;
          std::vector<int> ctx;
          for (int r = 0; r < nr; ++r) {
            qs.push_back(random_q(hd, 300 + uint32_t(r)));
            ctx.push_back(1 + int(rng() % 90));
          }
          for (auto& q : qs) qp.push_back(q.data() + 1);
          const size_t n = size_t(nr);
          std::vector<float> m1(n), l1(n), a1(n * size_t(hd)), m2(n), l2(n), a2(n * size_t(hd));
          for (int r = 0; r < nr; ++r) {
            attend_start(hd, &m1[size_t(r)], &l1[size_t(r)], &a1[size_t(r * hd)]);
            attend_start(hd, &m2[size_t(r)], &l2[size_t(r)], &a2[size_t(r * hd)]);
          }
          for (int blk = 0; blk * 32 < b.n_ctx; ++blk) {
            std::vector<int> cnt(n);
            for (int r = 0; r < nr; ++r)
              cnt[size_t(r)] = std::clamp(ctx[size_t(r)] - blk * 32, 0, 32);
            tile(b.L, b.head(blk, 0), nr, cnt.data(), qp.data(), m1.data(), l1.data(), a1.data());
            for (int r = 0; r < nr; ++r)
              tile(b.L, b.head(blk, 0), 1, &cnt[size_t(r)], &qp[size_t(r)], &m2[size_t(r)],
                   &l2[size_t(r)], &a2[size_t(r * hd)]);
          }
          ASSERT_EQ(0, std::memcmp(a1.data(), a2.data(), a1.size() * 4))
              << K->isa << " " << to_string(t) << " hd " << hd << " rows " << nr;
          ASSERT_EQ(0, std::memcmp(l1.data(), l2.data(), l1.size() * 4));
          // A span over the blocks (the prefill path) gives the same bits as
          // the tile block by block.
          if (const AttendSpanFn span = K->span_for_type(t)) {
            std::vector<float> m3(n), l3(n), a3(n * size_t(hd));
            for (int r = 0; r < nr; ++r)
              attend_start(hd, &m3[size_t(r)], &l3[size_t(r)], &a3[size_t(r * hd)]);
            std::vector<HeadBlock> hbs;
            for (int blk = 0; blk * 32 < b.n_ctx; ++blk) hbs.push_back(b.head(blk, 0));
            span(b.L, hbs.data(), int(hbs.size()), nr, ctx.data(), qp.data(), m3.data(), l3.data(),
                 a3.data());
            ASSERT_EQ(0, std::memcmp(a3.data(), a1.data(), a1.size() * 4))
                << K->isa << " span " << to_string(t) << " hd " << hd << " rows " << nr;
            ASSERT_EQ(0, std::memcmp(l3.data(), l1.data(), l1.size() * 4));
            ASSERT_EQ(0, std::memcmp(m3.data(), m1.data(), m1.size() * 4));
          }
          // And against the scalar oracle run row by row.
          for (int r = 0; r < nr; ++r) {
            float m = 0, l = 0;
            const size_t hn = static_cast<size_t>(hd);
            std::vector<float> acc(hn), o1(hn), o2(hn);
            attend_start(hd, &m, &l, acc.data());
            for (int blk = 0; blk * 32 < ctx[size_t(r)]; ++blk)
              scalar_attend_kernels().for_type(t)(b.L, b.head(blk, 0),
                                                  std::min(32, ctx[size_t(r)] - blk * 32),
                                                  qp[size_t(r)], &m, &l, acc.data());
            attend_finish(hd, l, acc.data(), o1.data());
            attend_finish(hd, l1[size_t(r)], &a1[size_t(r * hd)], o2.data());
            const double tol = std::string(K->isa) == "avx512" && t != KvType::F16 ? 2e-2 : 1e-4;
            for (int j = 0; j < hd; ++j) ASSERT_NEAR(o1[size_t(j)], o2[size_t(j)], tol);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern::kv

namespace tern::kv {
namespace {

// The AVX-512 kernels round each token's weight (probability x value scale)
// to bf16. Against attention over the unquantized keys and values, that must
// add little to the cache's own rounding: for flat and for sharp softmaxes
// (large scores, an outlier query dim), their error stays within 10% of the
// fp32 kernels'.
TEST(KvAttend, Avx512RoundingStaysBelowTheCachesOwn) {
  const AttendKernels* avx2 = attend_kernels_for(kernels::Isa::Avx2);
  const AttendKernels* avx512 = attend_kernels_for(kernels::Isa::Avx512Vnni);
  if (!avx2 || !avx512 || avx512 == avx2) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  for (KvType t : {KvType::Int8, KvType::Int8Fp8, KvType::Int4Fp8}) {
    for (float sharp : {1.0f, 20.0f}) {
      double e2 = 0, e5 = 0;
      for (int trial = 0; trial < 8; ++trial) {
        const Blocks bl(t, 64, 32, 200, uint32_t(trial + 1));
        auto q = random_q(64, uint32_t(trial + 50));
        for (auto& x : q) x *= sharp;
        q[5] *= sharp > 1 ? 30.0f : 1.0f;
        std::vector<float> o2(64), o5(64);
        bl.attend(*avx2, 0, q.data(), o2.data());
        bl.attend(*avx512, 0, q.data(), o5.data());
        const auto ref = bl.oracle_float(0, q.data());
        for (int j = 0; j < 64; ++j) {
          e2 += std::fabs(o2[size_t(j)] - ref[size_t(j)]);
          e5 += std::fabs(o5[size_t(j)] - ref[size_t(j)]);
        }
      }
      EXPECT_LT(e5, 1.1 * e2) << to_string(t) << " sharpness " << sharp;
    }
  }
}

}  // namespace
}  // namespace tern::kv

namespace tern::kv {
namespace {

// One token attended alone has weight one, so every kernel must give back its
// decoded value row. Every value code (fp8 e4m3 and int8, both signs,
// denormals, in every dim position of odd head sizes) goes through the
// AVX-512 value path's byte tables and permutes; the weights are normalised
// from their own rounded values, so the result is the decode to fp32
// rounding.
TEST(KvAttend, SingleTokenGivesBackEveryValueCode) {
  for (const AttendKernels* K : all_kernels()) {
    for (KvType t : {KvType::Int8, KvType::Int8Fp8}) {
      for (int hd : {255, 256, 70, 17}) {
        const KvLayout L = KvLayout::make(1, 1, hd, 32, t);
        AlignedBuffer<uint8_t> mem(L.block_bytes);
        std::memset(mem.data(), 0, L.block_bytes);
        const HeadBlock hb = head_block(L, mem.data(), 0);
        for (int shift : {0, 1, 97}) {
          uint8_t* v = const_cast<uint8_t*>(hb.v);
          for (int j = 0; j < hd; ++j) {
            int code = (j * 7 + shift) % 256;
            if (t == KvType::Int8Fp8 && (code & 0x7f) == 0x7f) code ^= 1;  // not NaN
            if (t == KvType::Int8 && code == 0x80) code = 0x81;            // -127 is the floor
            v[j] = uint8_t(code);
          }
          const_cast<float*>(hb.vs)[0] = 0.37f;
          const_cast<float*>(hb.ks)[0] = 0.5f;
          std::vector<float> want(static_cast<size_t>(hd)), q(static_cast<size_t>(hd), 0.1f);
          decode_v(L, hb, 0, want.data());
          float m, l;
          std::vector<float> acc(static_cast<size_t>(hd)), out(static_cast<size_t>(hd));
          attend_start(hd, &m, &l, acc.data());
          K->for_type(t)(L, hb, 1, q.data(), &m, &l, acc.data());
          attend_finish(hd, l, acc.data(), out.data());
          for (int j = 0; j < hd; ++j)
            ASSERT_NEAR(out[size_t(j)], want[size_t(j)], 1e-6f * std::fabs(want[size_t(j)]))
                << K->isa << " " << to_string(t) << " hd " << hd << " dim " << j;
        }
      }
    }
  }
}

// Partial super-groups of keys (n not a multiple of 16), head sizes that are
// not multiples of 4 or 64, and a causal edge inside the block: every row of
// a tile against the float64 oracle over the decoded rows.
TEST(KvAttend, TilesMatchOracleOnPartialKeyGroups) {
  for (const AttendKernels* K : all_kernels()) {
    for (KvType t : {KvType::Int8, KvType::Int8Fp8, KvType::Int4Fp8}) {
      const AttendTileFn tile = K->tile_for_type(t);
      if (!tile) continue;  // the scalar table has one-row kernels only
      for (int hd : {6, 66, 130}) {
        for (int n : {1, 15, 17, 31, 33, 47}) {
          const Blocks b(t, hd, 48, n, uint32_t(hd * 100 + n));
          const auto qbuf = random_q(hd, uint32_t(n));
          const float* q = qbuf.data() + 1;
          float m, l;
          std::vector<float> acc(static_cast<size_t>(hd)), out(static_cast<size_t>(hd));
          attend_start(hd, &m, &l, acc.data());
          tile(b.L, b.head(0, 1), 1, &n, &q, &m, &l, acc.data());
          attend_finish(hd, l, acc.data(), out.data());
          const auto ref = b.oracle_decoded(1, q);
          double vmax = 0;
          for (float x : b.v) vmax = std::max(vmax, double(std::fabs(x)));
          for (int j = 0; j < hd; ++j)
            ASSERT_NEAR(out[size_t(j)], ref[size_t(j)], 1e-2 * vmax)
                << K->isa << " " << to_string(t) << " hd " << hd << " n " << n << " j " << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern::kv
