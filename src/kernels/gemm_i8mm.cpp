// The NEON + SMMLA kernel table (Armv8.6 i8mm: Neoverse V1/N2, Cortex-A710 on,
// Apple M2 on). SMMLA multiplies a 2x8 int8 matrix by an 8x2 one into a 2x2
// int32 block: here 2 activation rows by 2 weight rows over 8 consecutive
// inputs, 32 multiply-adds, twice SDOT's 16. The weights come from packed.h's
// chunks with one zip (gemm_neon.inl); 4 activation rows (2 pairs) x 8
// channels a GEMM micro-kernel. One row (decode) would waste half of every
// SMMLA, so the GEMV is the SDOT one. Compiled with
// -march=armv8.2-a+dotprod+i8mm; chosen only when HWCAP2_I8MM says so.
#include "dispatch.h"
#include "gemm_neon.inl"
#include "ops_neon.h"

namespace tern::kernels {
namespace arm {
namespace {

struct SmmlaDot {
  static constexpr int kRows = 4;
  // Quad order: rows (0,1), (2,3), (4,5), (6,7), each with 8 consecutive inputs.
  [[gnu::always_inline]] static Quad prep(int8x16_t c0h0, int8x16_t c0h1, int8x16_t c1h0,
                                          int8x16_t c1h1) {
    auto zip1 = [](int8x16_t a, int8x16_t b) {
      return vreinterpretq_s8_s32(vzip1q_s32(vreinterpretq_s32_s8(a), vreinterpretq_s32_s8(b)));
    };
    auto zip2 = [](int8x16_t a, int8x16_t b) {
      return vreinterpretq_s8_s32(vzip2q_s32(vreinterpretq_s32_s8(a), vreinterpretq_s32_s8(b)));
    };
    return Quad{{zip1(c0h0, c1h0), zip2(c0h0, c1h0), zip1(c0h1, c1h1), zip2(c0h1, c1h1)}};
  }
  // v[p][k]: activation rows (2p, 2p+1) x weight rows (2k, 2k+1), lanes
  // (a0 w0, a0 w1, a1 w0, a1 w1). An odd last row is paired with itself.
  template <int R, bool kWide>
  struct Sums {
    int32x4_t v[(R + 1) / 2][4];
  };
  template <int R, bool W>
  [[gnu::always_inline]] static void zero(Sums<R, W>& s) {
    unroll<(R + 1) / 2>([&](auto p) __attribute__((always_inline)) {
      unroll<4>([&](auto k) __attribute__((always_inline)) { s.v[p][k] = vdupq_n_s32(0); });
    });
  }
  template <int P, int R, bool W>
  [[gnu::always_inline]] static void step(Sums<R, W>& s, const Quad& q, const int8_t* a,
                                          int stride) {
    unroll<(R + 1) / 2>([&](auto p) __attribute__((always_inline)) {
      const int ra = 2 * p, rb = std::min(2 * p + 1, R - 1);
      const int8x16_t x =
          vcombine_s8(vld1_s8(a + ra * stride + 8 * P), vld1_s8(a + rb * stride + 8 * P));
      unroll<4>([&](auto k) __attribute__((always_inline)) {
        s.v[p][k] = vmmlaq_s32(s.v[p][k], x, q.w[k]);
      });
    });
  }
  template <int R, bool W>
  [[gnu::always_inline]] static void finish(const Sums<R, W>& s, int32x4_t out[R][2]) {
    auto zip1 = [](int32x4_t a, int32x4_t b) {
      return vreinterpretq_s32_s64(vzip1q_s64(vreinterpretq_s64_s32(a), vreinterpretq_s64_s32(b)));
    };
    auto zip2 = [](int32x4_t a, int32x4_t b) {
      return vreinterpretq_s32_s64(vzip2q_s64(vreinterpretq_s64_s32(a), vreinterpretq_s64_s32(b)));
    };
    unroll<(R + 1) / 2>([&](auto p) __attribute__((always_inline)) {
      unroll<2>([&](auto h) __attribute__((always_inline)) {
        out[2 * p][h] = zip1(s.v[p][2 * h], s.v[p][2 * h + 1]);
        if constexpr (2 * p + 1 < R) out[2 * p + 1][h] = zip2(s.v[p][2 * h], s.v[p][2 * h + 1]);
      });
    });
  }
};

}  // namespace
}  // namespace arm

const KernelTable* i8mm_kernels() {
  static const KernelTable t =
      neon::table("neon-i8mm", arm::gemm_tiles<arm::SmmlaDot, arm::SdotDot>);
  return &t;
}

}  // namespace tern::kernels
