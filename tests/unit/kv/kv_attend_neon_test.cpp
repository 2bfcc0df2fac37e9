// What the NEON attention tables promise beyond the shared kernel tests:
// "neon" (SMLAL) and "neon-dotprod" (SDOT) compute the same exact integer
// key sums and share everything else, so they agree bit for bit; and every
// table's integer key scores stay exact at the largest head_dim with the
// largest codes (no int32 overflow).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tern/core/aligned.h"
#include "tern/kernels/ops.h"
#include "tern/kv/kv_attend.h"

namespace tern::kv {
namespace {

constexpr KvType kTypes[] = {KvType::F16, KvType::Int8, KvType::Int8Fp8, KvType::Int4Fp8};

// One head of one block of B tokens of random keys (an outlier channel) and values.
struct OneBlock {
  KvLayout L;
  AlignedBuffer<uint8_t> mem;
  OneBlock(KvType t, int hd, int B, uint32_t seed)
      : L(KvLayout::make(1, 1, hd, B, t)), mem(L.block_bytes) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> k(static_cast<size_t>(hd)), v(static_cast<size_t>(hd));
    for (int p = 0; p < B; ++p) {
      for (int j = 0; j < hd; ++j)
        k[size_t(j)] = d(rng) * (j == 3 ? 8.0f : 1.0f), v[size_t(j)] = d(rng);
      encode_token(L, k.data(), v.data(), mem.data(), p);
    }
  }
  HeadBlock head() const { return head_block(L, mem.data(), 0); }
};

TEST(KvAttendNeon, SmlalAndSdotTablesAreBitIdentical) {
  const AttendKernels* neon = attend_kernels_for(kernels::Isa::Neon);
  const AttendKernels* dot = attend_kernels_for(kernels::Isa::NeonDotprod);
  if (!neon || !dot || neon == dot) GTEST_SKIP() << "needs both NEON tables (aarch64 with dotprod)";
  EXPECT_STREQ(neon->isa, "neon");
  EXPECT_STREQ(dot->isa, "neon-dotprod");
  for (KvType t : kTypes) {
    for (int hd : {2, 18, 64, 130, 256, 512}) {
      const int B = 37, nr = 6;
      const OneBlock b(t, hd, B, uint32_t(hd + int(t)));
      std::mt19937 rng(static_cast<uint32_t>(hd));
      std::normal_distribution<float> d(0.0f, 2.0f / std::sqrt(float(hd)));
      std::vector<std::vector<float>> qs(nr, std::vector<float>(static_cast<size_t>(hd)));
      std::vector<const float*> qp;
      for (auto& q : qs) {
        for (float& x : q) x = d(rng);
        qp.push_back(q.data());
      }
      const int n_tok[nr] = {1, 7, 8, 9, 36, 37};
      std::vector<float> m1(nr), l1(nr), a1(size_t(nr * hd)), m2(nr), l2(nr), a2(size_t(nr * hd));
      for (int r = 0; r < nr; ++r) {
        attend_start(hd, &m1[size_t(r)], &l1[size_t(r)], &a1[size_t(r * hd)]);
        attend_start(hd, &m2[size_t(r)], &l2[size_t(r)], &a2[size_t(r * hd)]);
      }
      neon->tile_for_type(t)(b.L, b.head(), nr, n_tok, qp.data(), m1.data(), l1.data(), a1.data());
      dot->tile_for_type(t)(b.L, b.head(), nr, n_tok, qp.data(), m2.data(), l2.data(), a2.data());
      EXPECT_EQ(0, std::memcmp(m1.data(), m2.data(), m1.size() * 4))
          << to_string(t) << " hd " << hd;
      EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), l1.size() * 4))
          << to_string(t) << " hd " << hd;
      EXPECT_EQ(0, std::memcmp(a1.data(), a2.data(), a1.size() * 4))
          << to_string(t) << " hd " << hd;
    }
  }
}

// Two tokens at head_dim 512: keys of all -128 codes and all +127 codes, a
// query whose every dim is its largest. Integer scores then reach
// 512 x 32512 x 128 (just under 2^31 for NEON's query codes); a wrapped sum
// would flip the softmax to the other token's value.
TEST(KvAttend, IntegerKeyScoresHoldAtTheLargestHeadDim) {
  const int hd = 512;
  for (const AttendKernels* K : available_attend_kernels()) {
    for (KvType t : {KvType::Int8, KvType::Int8Fp8}) {
      const KvLayout L = KvLayout::make(1, 1, hd, 32, t);
      AlignedBuffer<uint8_t> mem(L.block_bytes);
      std::memset(mem.data(), 0, L.block_bytes);
      const HeadBlock hb = head_block(L, mem.data(), 0);
      uint8_t* k = const_cast<uint8_t*>(hb.k);
      uint8_t* v = const_cast<uint8_t*>(hb.v);
      std::memset(k, 0x80, size_t(hd));            // token 0: -128
      std::memset(k + L.k_row, 0x7f, size_t(hd));  // token 1: +127
      std::memset(v, 0x30, size_t(hd));            // positive values
      std::memset(v + L.v_row, 0xb0, size_t(hd));  // negative values (fp8 and int8)
      float* ks = const_cast<float*>(hb.ks);
      float* vs = const_cast<float*>(hb.vs);
      ks[0] = ks[1] = 0.01f;
      vs[0] = vs[1] = 1.0f;
      const std::vector<float> q(size_t(hd), 0.01f);  // scores -6.55 and +6.50
      // float64 reference over the decoded rows.
      std::vector<float> kr(static_cast<size_t>(hd)), v0(static_cast<size_t>(hd)),
          v1(static_cast<size_t>(hd));
      double s[2];
      for (int p = 0; p < 2; ++p) {
        decode_k(L, hb, p, kr.data());
        s[p] = 0;
        for (int j = 0; j < hd; ++j) s[p] += double(q[size_t(j)]) * kr[size_t(j)];
      }
      decode_v(L, hb, 0, v0.data());
      decode_v(L, hb, 1, v1.data());
      const double w0 = 1.0 / (1.0 + std::exp(s[1] - s[0])), w1 = 1.0 - w0;
      float m, l;
      std::vector<float> acc(static_cast<size_t>(hd)), out(static_cast<size_t>(hd));
      attend_start(hd, &m, &l, acc.data());
      K->for_type(t)(L, hb, 2, q.data(), &m, &l, acc.data());
      attend_finish(hd, l, acc.data(), out.data());
      for (int j = 0; j < hd; ++j) {
        const double want = w0 * v0[size_t(j)] + w1 * v1[size_t(j)];
        ASSERT_NEAR(out[size_t(j)], want, 1e-4 * std::fabs(v1[size_t(j)]))
            << K->isa << " " << to_string(t) << " dim " << j;
      }
    }
  }
}

}  // namespace
}  // namespace tern::kv
