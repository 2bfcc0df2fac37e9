// The Armv8.0 NEON kernel table (Cortex-A53/A72, any aarch64 CPU): matrix
// products without a 4-byte dot product instruction. Per 4 inputs of 4 rows
// (16 weight bytes) and one activation row, the 4 activation bytes are
// replicated (ld1r) and smull/smlal (and their high halves) multiply them into
// int16 lanes, one per (row, input). int4 and int5 codes add up in int16
// across the group (8 products a lane, at most 8*31*127 = 31496 < 32767) and
// are widened once a group (saddlp, then addp to one lane a row); int8 pairs
// reach 2*128*127 = 32512, so every two products are widened into int32
// (sadalp). 3 activation rows a GEMM micro-kernel (the int16 sums take 4
// registers a row), 2 tiles a GEMV one (gemm_neon.inl).
#include "gemm_neon.inl"

#include "dispatch.h"
#include "ops_neon.h"

namespace tern::kernels {
namespace arm {
namespace {

// Quad order as SDOT's: (chunk c rows 0-3, rows 4-7, chunk c+1 rows 0-3, rows 4-7).
struct WideningDot {
  static constexpr int kRows = 3, kGemvTiles = 2;
  static constexpr bool kMagicSums = false, kHalves = false;  // the sums are widened from int16
  // v[r][2h + k]: rows 4h+2k, 4h+2k+1 of activation row r; int16 lanes
  // (row, input j) while !kWide, int32 lanes (row, pair of inputs) when kWide.
  template <int R, bool kWide>
  struct Sums {
    std::conditional_t<kWide, int32x4_t, int16x8_t> v[R][4];
  };
  [[gnu::always_inline]] static Quad prep(int8x16_t a, int8x16_t b, int8x16_t c, int8x16_t d) {
    return Quad{{a, b, c, d}};
  }
  template <int R, bool W>
  [[gnu::always_inline]] static void zero(Sums<R, W>& s, const int32_t*) {
    unroll<R>([&](auto r) __attribute__((always_inline)) {
      unroll<4>([&](auto i) __attribute__((always_inline)) {
        if constexpr (W) {
          s.v[r][i] = vdupq_n_s32(0);
        } else {
          s.v[r][i] = vdupq_n_s16(0);
        }
      });
    });
  }
  // The 4 bytes at p in every int32 lane (ld1r).
  [[gnu::always_inline]] static int8x16_t bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
  }
  template <int P, int R, bool W>
  [[gnu::always_inline]] static void step(Sums<R, W>& s, const Quad& q, const int8_t* a,
                                          int stride) {
    unroll<R>([&](auto r) __attribute__((always_inline)) {
      const int8x16_t a0 = bcast4(a + r * stride + 8 * P), a1 = bcast4(a + r * stride + 8 * P + 4);
      unroll<2>([&](auto h) __attribute__((always_inline)) {
        const int8x16_t w0 = q.w[h], w1 = q.w[2 + h];
        if constexpr (W) {
          int16x8_t lo = vmull_s8(vget_low_s8(w0), vget_low_s8(a0));
          int16x8_t hi = vmull_high_s8(w0, a0);
          lo = vmlal_s8(lo, vget_low_s8(w1), vget_low_s8(a1));
          hi = vmlal_high_s8(hi, w1, a1);
          s.v[r][2 * h] = vpadalq_s16(s.v[r][2 * h], lo);
          s.v[r][2 * h + 1] = vpadalq_s16(s.v[r][2 * h + 1], hi);
        } else {
          s.v[r][2 * h] = vmlal_s8(s.v[r][2 * h], vget_low_s8(w0), vget_low_s8(a0));
          s.v[r][2 * h + 1] = vmlal_high_s8(s.v[r][2 * h + 1], w0, a0);
          s.v[r][2 * h] = vmlal_s8(s.v[r][2 * h], vget_low_s8(w1), vget_low_s8(a1));
          s.v[r][2 * h + 1] = vmlal_high_s8(s.v[r][2 * h + 1], w1, a1);
        }
      });
    });
  }
  template <int R, bool W>
  [[gnu::always_inline]] static void finish(const Sums<R, W>& s, int32x4_t out[R][2]) {
    unroll<R>([&](auto r) __attribute__((always_inline)) {
      unroll<2>([&](auto h) __attribute__((always_inline)) {
        if constexpr (W) {
          out[r][h] = vpaddq_s32(s.v[r][2 * h], s.v[r][2 * h + 1]);
        } else {
          out[r][h] = vpaddq_s32(vpaddlq_s16(s.v[r][2 * h]), vpaddlq_s16(s.v[r][2 * h + 1]));
        }
      });
    });
  }
};

}  // namespace
}  // namespace arm

const KernelTable* neon_kernels() {
  static const KernelTable t =
      neon::table("neon", arm::gemm_tiles<arm::WideningDot, arm::WideningDot>);
  return &t;
}

}  // namespace tern::kernels
