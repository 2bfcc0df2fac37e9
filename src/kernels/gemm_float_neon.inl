// The aarch64 float-weight micro-kernels (F16 and Bf16 tiles, fp32
// activations; layout: packed.h's FloatBlock). Included by gemm_neon.inl, so
// every aarch64 table compiles its own copy. Armv8.0 only: fcvtl / fcvtl2 and
// shll / shll2 are base Advanced SIMD.
//
// The 8 values of input e (16 bytes) convert into two q registers, lanes
// rows 0-3 and rows 4-7; a row's 4 consecutive activations sit in one q
// register and fmla by element picks each (no broadcast). Per lane the
// scalar twin's fma over e in order (gemm_float_ref): bit-identical to it.
// R rows x NT tiles take 2 R NT accumulators + 2 NT weights + R activation
// registers: GEMM 4 x 2 (24 of 32 registers), GEMV 1 x 4 (17).

namespace tern::kernels::arm {
namespace {

struct F16Quads {  // the 8 fp16 values at p as rows 0-3 and 4-7
  [[gnu::always_inline]] static void load(const uint16_t* p, float32x4_t out[2]) {
    load_f16x8(p, out);
  }
};
struct Bf16Quads {  // the 8 bfloat16 values at p: each shifted into an fp32's top half
  [[gnu::always_inline]] static void load(const uint16_t* p, float32x4_t out[2]) {
    const uint16x8_t h = vld1q_u16(p);
    out[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    out[1] = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
  }
};

// y[r][j*8 + i] (row stride y_stride) for R rows of x (stride n_in) and NT
// tiles from `tile` (`groups` blocks apart); the last keeps n_valid_last rows.
template <class Quads, int R, int NT>
inline void float_tiles(const FloatBlock* tile, int groups, const float* x, int n_in, float* y,
                        int y_stride, int n_valid_last, int ahead) {
  float32x4_t acc[R][NT][2];
  unroll<R>([&](auto r) __attribute__((always_inline)) {
    unroll<NT>([&](auto j) __attribute__((always_inline)) {
      acc[r][j][0] = vdupq_n_f32(0.0f);
      acc[r][j][1] = vdupq_n_f32(0.0f);
    });
  });
  for (int g = 0; g < groups; ++g) {
    if (ahead > 0) {
      unroll<NT>([&](auto j) __attribute__((always_inline)) {
        prefetch_ahead(tile + size_t(j) * groups + g, ahead, int(sizeof(FloatBlock) / 64));
      });
    }
    for (int k4 = 0; k4 < kGroup; k4 += 4) {
      float32x4_t a[R];
      unroll<R>([&](auto r) __attribute__((always_inline)) {
        a[r] = vld1q_f32(x + size_t(r) * n_in + g * kGroup + k4);
      });
      unroll<4>([&](auto lane) __attribute__((always_inline)) {
        float32x4_t w[NT][2];
        unroll<NT>([&](auto j) __attribute__((always_inline)) {
          Quads::load(tile[size_t(j) * groups + g].w[k4 + lane], w[j]);
        });
        unroll<R>([&](auto r) __attribute__((always_inline)) {
          unroll<NT>([&](auto j) __attribute__((always_inline)) {
            acc[r][j][0] = vfmaq_laneq_f32(acc[r][j][0], w[j][0], a[r], lane);
            acc[r][j][1] = vfmaq_laneq_f32(acc[r][j][1], w[j][1], a[r], lane);
          });
        });
      });
    }
  }
  unroll<R>([&](auto r) __attribute__((always_inline)) {
    unroll<NT>([&](auto j) __attribute__((always_inline)) {
      store_tile(y + size_t(r) * y_stride + j * kTileRows, acc[r][j],
                 j == NT - 1 ? n_valid_last : kTileRows);
    });
  });
}

// Rows [r0, r1) x tiles [t0, t1): R x NT kernels, then fewer tiles and rows.
template <class Quads, int R, int NT>
void float_rows(const PackedMatrix& w, const float* x, float* y, int r0, int r1, int t0, int t1,
                int ahead) {
  const auto* tiles = reinterpret_cast<const FloatBlock*>(w.tile(0));
  const int groups = w.n_groups();
  int r = r0;
  for (; r + R <= r1; r += R) {
    for (int t = t0; t < t1;) {
      const int nt = std::min(NT, t1 - t);
      const int n_valid = std::min(kTileRows, w.n_out - (t + nt - 1) * kTileRows);
      const float* xr = x + size_t(r) * w.n_in;
      float* yr = y + size_t(r) * w.n_out + t * kTileRows;
      const FloatBlock* tile = tiles + size_t(t) * groups;
      with_count<NT>(
          nt, [&](auto n) __attribute__((always_inline)) {
            float_tiles<Quads, R, decltype(n)::value>(tile, groups, xr, w.n_in, yr, w.n_out,
                                                      n_valid, ahead);
          });
      t += nt;
    }
  }
  if constexpr (R > 1) {
    if (r < r1) float_rows<Quads, R - 1, NT>(w, x, y, r, r1, t0, t1, ahead);
  }
}

// The gemm_tiles of F16 / Bf16 weights, for every aarch64 table.
template <class Quads>
void float_gemm(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0, int r1, int t0,
                int t1) {
  if (r1 - r0 == 1) {
    // 512-byte blocks: half the int8 GEMV's distance in blocks.
    float_rows<Quads, 1, 4>(w, qa.x, y, r0, r1, t0, t1, g_gemv_prefetch / 2);
    return;
  }
  float_rows<Quads, 4, 2>(w, qa.x, y, r0, r1, t0, t1, 0);
}

inline void float_gemm_tiles(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0,
                             int r1, int t0, int t1) {
  if (w.format == WeightFormat::F16) return float_gemm<F16Quads>(w, qa, y, r0, r1, t0, t1);
  float_gemm<Bf16Quads>(w, qa, y, r0, r1, t0, t1);
}

}  // namespace
}  // namespace tern::kernels::arm
