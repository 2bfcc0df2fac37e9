// The aarch64 matrix-product micro-kernels, written once over a Dot policy
// that supplies the integer dot products: Armv8.0 widening multiplies
// (gemm_neon.cpp) or SDOT (gemm_dotprod.cpp, and the GEMV of the i8mm table).
// gemm_i8mm.cpp's SMMLA GEMM kernels are its own, built from the formats and
// epilogue pieces here. Each of those files includes this one and compiles
// its own copy with its own -march: hence the anonymous namespace.
//
// Why packed.h's layout suits NEON as it is. A 16-byte half of a chunk,
// q[c][0..3][0..3], holds 4 consecutive inputs of 4 rows: exactly the B operand
// of SDOT's indexed form, vdotq_laneq_s32(acc, w, x, lane), whose 4 int32 lanes
// are the 4 rows and whose `lane` picks 4 activation bytes from a register
// loaded once (16 inputs) -- no broadcast, no horizontal sum, and the fp16
// scales d[0..3], d[4..7] convert (fcvtl) straight into the lanes they scale.
// For SMMLA (A: 2x8 activations, B: 2 rows x 8 consecutive inputs) one
// vzip1q_s32/vzip2q_s32 of chunks c and c+1 gives rows (0,1) and (2,3) with
// their 8 consecutive inputs; the zips are bytewise permutations, so they
// commute with the nibble unpacking and run on the raw bytes (gemm_i8mm.cpp).
// They are 8 of the ~164 vector instructions of an 8-row int4 SMMLA group
// (5 %): not worth a second packed layout (packing would have to know the ISA, and every
// format would need a second packer and its tests).
// Armv8.0 has no 4-byte dot product: smull/smlal of 8 bytes by the 4
// activation bytes replicated (ld1r) give int16 products per (row, input),
// added across the group in int16 (int4/int5: 8 products a lane, at most
// 8*31*127 = 31496) or widened every 2 products with sadalp (int8).
//
// What bounds the loops: the fp32 epilogue. With one scale per 32 inputs it is
// paid every group, per 4 outputs: the int32 -> fp32 conversion, d_w * d_x (an
// fmul: the reference rounds the product), the fma and, int4/int5, the
// minimum's fma -- 4 vector instructions against 8 SDOTs or 4 SMMLAs of
// multiplies. Neoverse N2 (and V1) run all of them on the same two 128-bit
// vector pipes (V1: four, with SVE), so even with free weight unpacking an
// exact per-32 epilogue caps the GEMM at 8/(8+4) = 67% of the SDOT peak and
// 4/(4+4) = 50% of the SMMLA peak (int8, no minimum: 73% and 57%); the
// issue's 80% is out of reach whatever the tile. What the kernels do about it:
//  - No SCVTF (2 cycles of pipe V0 in LLVM's N2 model, against 1 of either
//    pipe for an FSUB): sums start at the bits of 1.5 * 2^23 (kMagicBits)
//    and, read as a float, are 1.5 * 2^23 + sumi exactly; one FSUB gives
//    float(sumi). The starting values come from loads (load ports, 3 a
//    cycle), not register copies (vector pipes).
//  - Tall tiles: the weight unpacking (a fixed cost per weight byte: an AND or
//    a shift per 16 codes, plus the SMMLA zips and the scale conversions) is
//    shared by 8 or 16 activation rows instead of 4.
//  - SMMLA's fp32 accumulators stay in its 2x2 layout (the scales are
//    duplicated to match, once per tile and group; the outputs un-permuted at
//    the store) and its A operands come from a copy of the activations made
//    once per task (gemm_i8mm.cpp): no lane inserts or zips per group.
//
// Register budget (32 q registers) and tile shapes. MNN-LLM's 12x8x4 (sdot)
// and 10x8x8 (i8mm) amortize per-channel scales over the whole reduction; here
// the accumulators are what a tall tile costs:
//   SDOT GEMM (tile_kernel_halves): 8 rows x 8 channels, one tile half (rows
//   4h..4h+3) at a time: 16 fp32 accumulators + 8 unpacked weight registers
//   of the half + one int32 sum + an activation register + scales; 16 rows x
//   4 channels (16 accumulators, the tile in two passes) when a task has 16
//   rows: the unpacking is then shared by 16 rows.
//   SMMLA GEMM (gemm_i8mm.cpp): 8 rows x 8 channels or 16 rows x 4, one
//   weight row pair (4 B operands) at a time, likewise 16 accumulators.
//   Armv8.0 GEMM (tile_kernel): R = 3 rows x 8 channels; its int16 sums take
//   4 registers a row (~28 registers).
//   Each tile (a few KB) is applied to all the task's rows from L1.
//   GEMV (one row): 4 tiles (32 channels) side by side on SDOT (4 independent
//   accumulator chains, one 640-byte int4 stream a group), 2 on Armv8.0; with
//   a software prefetch g_gemv_prefetch blocks ahead. Each weight is used
//   once, so nothing amortizes the unpacking: per int4 tile and group 16
//   SDOTs, 16 unpacking instructions, 8 epilogue ones and 4 fcvtl (2 cycles
//   each on N2) -- ~48 pipe cycles, 3x the 16 of the loads and SDOTs alone.
// llvm-mca-16 (bench/arm/mca_table.py; estimates from LLVM's scheduling
// models, not measurements), multiply-adds per cycle, Neoverse N2 / Apple M1
// (M1 has no i8mm: its model guesses SMMLA's cost and loads 2 q registers a
// cycle), every loop at its busiest pipe's bound on N2:
//                           int4        int5        int8
//   SMMLA GEMM 16x4     27.3 / 31.7  24.8 / 31.9  33.0 / 34.1   (43% of peak)
//   SMMLA GEMM 8x8      24.3 / 28.6  21.1 / 28.2  30.1 / 29.4   (was 4x8:
//                                                 15.7, 12.6, 18.9 on N2)
//   SDOT GEMM 16x4      19.9 / 27.2  18.7 / 24.3  22.9 / 31.0
//   SDOT GEMM 8x8       18.8 / 25.5  17.0 / 23.9  22.5 / 27.6   (was 4x8:
//                                                 14.5, 12.3, 17.9 on N2)
//   SDOT GEMV 4 tiles   10.7 / 17.4   7.3 / 11.3  19.4 / 20.2   (was 9.8,
//                                                 6.4, 17.0 on N2)
//   Armv8.0 GEMM 3x8     6.4 /  8.3   6.9 /  9.6   5.5 /  4.6
// llama.cpp's repacked Q4_0 loops through the same models: gemm_q4_0_4x8
// (SMMLA, 16 rows x 4) 25.0 / 38.6, gemm_q4_0_4x4 (SDOT) 19.3 / 29.6,
// gemv_q4_0_4x4 10.1 / 11.5. Q4_0 has no minimum (3 epilogue instructions per
// 4 outputs, not 4); tern's int4 is Q4_1's format.
//
// Every output lane walks the groups in order with the same fused
// multiply-adds as gemm_tiles_ref (vfmaq, never mul + add), so the results are
// bit-identical to the scalar reference.
//
// Dot policy (R activation rows, one tile; SDOT and Armv8.0):
//   Quad prep(c0h0, c0h1, c1h0, c1h1)   the raw bytes of two consecutive chunks (h: rows 0-3,
//                                       4-7) in the policy's operand order
//   Sums<R, kWide>, zero(Sums&, magic)  running integer sums of one group (kWide: int8 codes);
//                                       kMagicSums: they start at kMagicBits (from magic)
//   step<P>(Sums&, Quad, a, stride)     adds inputs 8P..8P+7 of the group; row r's activations
//                                       of the group at a + r*stride
//   finish(Sums&, int32x4_t out[R][2])  the int32 sums, out[r][h] = rows 4h..4h+3
//   kRows, kGemvTiles, kHalves          the micro-kernel shapes (kHalves: tile_kernel_halves)
#include <arm_neon.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "dispatch.h"
#include "tern/kernels/packed.h"

// GCC's pre-allocation scheduler hoists the weight loads and unpacking of a
// whole group ahead of their dot products; with 16 accumulators live that
// spilled up to 40 registers a group (R = 4 int4 on SDOT). Without it the
// kernels keep everything in registers (bench/arm/mca_table.py counts the
// spills); the out-of-order cores this runs on schedule the loads themselves.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif

#ifdef TERN_MCA_MARKERS  // bench/arm/mca_table.py: the loop bodies llvm-mca analyses
#define TERN_MCA_BEGIN(name) __asm__ volatile("# LLVM-MCA-BEGIN " name)
#define TERN_MCA_END() __asm__ volatile("# LLVM-MCA-END")
#else
#define TERN_MCA_BEGIN(name)
#define TERN_MCA_END()
#endif

namespace tern::kernels::arm {
namespace {

template <int N>
using Int = std::integral_constant<int, N>;

// f(Int<0>{}), ..., f(Int<N-1>{}). Loops over registers are unrolled in the
// source: GCC scalarizes arrays of vectors (keeps them in registers) only when
// every index is a constant, and it does that before it unrolls loops -- with
// a loop counter the accumulators stayed on the stack, loaded and stored every
// group.
template <int N, class F>
[[gnu::always_inline]] inline void unroll(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) __attribute__((always_inline)) {
    (f(Int<I>{}), ...);
  }
  (std::make_integer_sequence<int, N>{});
}

// Four registers of weights covering 8 consecutive inputs of the tile's 8 rows.
struct Quad {
  int8x16_t w[4];
};

// The 8 fp16 values at p as two fp32 vectors (lanes 0-3 and 4-7).
[[gnu::always_inline]] inline void load_f16x8(const uint16_t* p, float32x4_t out[2]) {
  const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
  out[0] = vcvt_f32_f16(vget_low_f16(h));
  out[1] = vcvt_high_f32_f16(h);
}

// The 4 fp16 values at p as fp32.
[[gnu::always_inline]] inline float32x4_t load_f16x4(const uint16_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

// Software prefetch of the block `ahead` blocks after p (its `lines` 64-byte
// lines) into L1; the address may lie past the matrix (a prefetch never faults).
template <typename Block>
[[gnu::always_inline]] inline void prefetch_ahead(const Block* p, int ahead, int lines) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) + uintptr_t(ahead) * sizeof(Block);
  for (int i = 0; i < lines; ++i) __builtin_prefetch(reinterpret_cast<const void*>(a + 64 * i));
}
constexpr int kAheadGemm = 16;  // groups: about one 576-input tile ahead

// The formats: each walks a block as 4 Quads (P = 0..3: inputs 8P..8P+7) and
// gives the per-row scales of the fp32 epilogue.
struct Int8Fmt {
  using Block = Int8Block;
  static constexpr bool kWide = true, kMin = false;
  static constexpr int kLines = 5;  // 272 bytes
  template <class Dot, class F>
  [[gnu::always_inline]] static void quads(const Block& b, F&& f) {
    auto one = [&](auto p) __attribute__((always_inline)) {
      const int8_t* q = &b.q[2 * decltype(p)::value][0][0];
      f(p, Dot::prep(vld1q_s8(q), vld1q_s8(q + 16), vld1q_s8(q + 32), vld1q_s8(q + 48)));
    };
    one(Int<0>{}), one(Int<1>{}), one(Int<2>{}), one(Int<3>{});
  }
  [[gnu::always_inline]] static void scales(const Block& b, float32x4_t d[2], float32x4_t[2]) {
    load_f16x8(b.d, d);
  }
  // Tile rows 4h..4h+3 only.
  [[gnu::always_inline]] static void half_scales(const Block& b, int h, float32x4_t& d,
                                                 float32x4_t&) {
    d = load_f16x4(b.d + 4 * h);
  }
};

// Int4: low nibbles of chunks 2k, 2k+1 are inputs 8k..8k+7 (P = k), their high
// nibbles inputs 16+8k.. (P = 2+k).
struct Int4Fmt {
  using Block = Int4Block;
  static constexpr bool kWide = false, kMin = true;
  static constexpr int kLines = 3;  // 160 bytes
  template <class Dot, class F>
  [[gnu::always_inline]] static void quads(const Block& b, F&& f) {
    const uint8x16_t mask = vdupq_n_u8(0x0f);
    auto one = [&](auto k) __attribute__((always_inline)) {
      const uint8_t* q = &b.q[2 * decltype(k)::value][0][0];
      const Quad raw = Dot::prep(vld1q_s8(reinterpret_cast<const int8_t*>(q)),
                                 vld1q_s8(reinterpret_cast<const int8_t*>(q + 16)),
                                 vld1q_s8(reinterpret_cast<const int8_t*>(q + 32)),
                                 vld1q_s8(reinterpret_cast<const int8_t*>(q + 48)));
      Quad lo, hi;
      unroll<4>([&](auto i) __attribute__((always_inline)) {
        const uint8x16_t u = vreinterpretq_u8_s8(raw.w[i]);
        lo.w[i] = vreinterpretq_s8_u8(vandq_u8(u, mask));
        hi.w[i] = vreinterpretq_s8_u8(vshrq_n_u8(u, 4));
      });
      f(k, lo);
      f(Int<2 + decltype(k)::value>{}, hi);
    };
    one(Int<0>{}), one(Int<1>{});
  }
  [[gnu::always_inline]] static void scales(const Block& b, float32x4_t d[2], float32x4_t m[2]) {
    load_f16x8(b.d, d);
    load_f16x8(b.m, m);
  }
  [[gnu::always_inline]] static void half_scales(const Block& b, int h, float32x4_t& d,
                                                 float32x4_t& m) {
    d = load_f16x4(b.d + 4 * h);
    m = load_f16x4(b.m + 4 * h);
  }
};

// Nl4 / Fp4: Int4's nibbles as indices into the format's codebook, looked up
// with tbl (bytewise, so it commutes with prep's permutation), then int8's
// dot products (kWide: levels reach -127) and epilogue.
template <WeightFormat kFormat>
struct Code4Fmt {
  using Block = Code4Block;
  static constexpr bool kWide = true, kMin = false;
  static constexpr int kLines = 3;  // 144 bytes
  [[gnu::always_inline]] static int8x16_t table() { return vld1q_s8(codebook_of(kFormat)); }
  template <class Dot, class F>
  [[gnu::always_inline]] static void quads(const Block& b, F&& f) {
    const uint8x16_t mask = vdupq_n_u8(0x0f);
    const int8x16_t tbl = table();
    auto one = [&](auto k) __attribute__((always_inline)) {
      const uint8_t* q = &b.q[2 * decltype(k)::value][0][0];
      const Quad raw = Dot::prep(vld1q_s8(reinterpret_cast<const int8_t*>(q)),
                                 vld1q_s8(reinterpret_cast<const int8_t*>(q + 16)),
                                 vld1q_s8(reinterpret_cast<const int8_t*>(q + 32)),
                                 vld1q_s8(reinterpret_cast<const int8_t*>(q + 48)));
      Quad lo, hi;
      unroll<4>([&](auto i) __attribute__((always_inline)) {
        const uint8x16_t u = vreinterpretq_u8_s8(raw.w[i]);
        lo.w[i] = vqtbl1q_s8(tbl, vandq_u8(u, mask));
        hi.w[i] = vqtbl1q_s8(tbl, vshrq_n_u8(u, 4));
      });
      f(k, lo);
      f(Int<2 + decltype(k)::value>{}, hi);
    };
    one(Int<0>{}), one(Int<1>{});
  }
  [[gnu::always_inline]] static void scales(const Block& b, float32x4_t d[2], float32x4_t[2]) {
    load_f16x8(b.d, d);
  }
  [[gnu::always_inline]] static void half_scales(const Block& b, int h, float32x4_t& d,
                                                 float32x4_t&) {
    d = load_f16x4(b.d + 4 * h);
  }
};

// Int5: as Int4, with bit 4 of each code from qh. qh has chunk c's bits at bit
// c (low nibbles) and 4+c (high nibbles) of the byte in chunk position, so one
// right shift by c serves both; prep() permutes qh and the shift counts exactly
// as it permutes the chunk bytes. Block5: Int5Block (Int5Sym, m = -16 d) or
// Int5AsymBlock (Int5Asym, m stored).
template <class Block5>
struct Int5Fmt {
  using Block = Block5;
  static constexpr bool kWide = false, kMin = true;
  static constexpr bool kAsym = std::is_same_v<Block5, Int5AsymBlock>;
  static constexpr int kLines = 3;  // 176 or 192 bytes
  template <class Dot, class F>
  [[gnu::always_inline]] static void quads(const Block& b, F&& f) {
    const uint8x16_t m1f = vdupq_n_u8(0x1f), m10 = vdupq_n_u8(0x10);
    const int8x16_t h0 = vld1q_s8(reinterpret_cast<const int8_t*>(&b.qh[0][0]));
    const int8x16_t h1 = vld1q_s8(reinterpret_cast<const int8_t*>(&b.qh[4][0]));
    const Quad qh = Dot::prep(h0, h1, h0, h1);
    auto one = [&](auto k) __attribute__((always_inline)) {
      constexpr int c = 2 * decltype(k)::value;  // chunks c, c+1
      const uint8_t* q = &b.q[c][0][0];
      const Quad raw = Dot::prep(vld1q_s8(reinterpret_cast<const int8_t*>(q)),
                                 vld1q_s8(reinterpret_cast<const int8_t*>(q + 16)),
                                 vld1q_s8(reinterpret_cast<const int8_t*>(q + 32)),
                                 vld1q_s8(reinterpret_cast<const int8_t*>(q + 48)));
      const int8x16_t s0 = vdupq_n_s8(-c), s1 = vdupq_n_s8(-(c + 1));  // right shifts
      const Quad shift = Dot::prep(s0, s0, s1, s1);
      Quad lo, hi;
      unroll<4>([&](auto i) __attribute__((always_inline)) {
        const uint8x16_t u = vreinterpretq_u8_s8(raw.w[i]);
        const uint8x16_t t = vshlq_u8(vreinterpretq_u8_s8(qh.w[i]), shift.w[i]);  // qh >> c
        // hi first: SLI overwrites its first operand, and u's last use
        // there saves a register copy.
        hi.w[i] = vreinterpretq_s8_u8(vsriq_n_u8(vandq_u8(t, m10), u, 4));
        lo.w[i] = vreinterpretq_s8_u8(vandq_u8(vsliq_n_u8(u, t, 4), m1f));
      });
      f(k, lo);
      f(Int<2 + decltype(k)::value>{}, hi);
    };
    one(Int<0>{}), one(Int<1>{});
  }
  [[gnu::always_inline]] static void scales(const Block& b, float32x4_t d[2], float32x4_t m[2]) {
    load_f16x8(b.d, d);
    if constexpr (kAsym) {
      load_f16x8(b.m, m);
    } else {
      m[0] = vmulq_n_f32(d[0], -16.0f);  // exact: the reference's -16 d
      m[1] = vmulq_n_f32(d[1], -16.0f);
    }
  }
  [[gnu::always_inline]] static void half_scales(const Block& b, int h, float32x4_t& d,
                                                 float32x4_t& m) {
    d = load_f16x4(b.d + 4 * h);
    if constexpr (kAsym) {
      m = load_f16x4(b.m + 4 * h);
    } else {
      m = vmulq_n_f32(d, -16.0f);
    }
  }
};

// Activation rows as the kernels see them: row r of q starts at q + r*n_in,
// its scales at d + r*groups and s + r*groups.
struct Rows {
  const int8_t* q;
  const float* d;
  const float* s;
  int n_in, groups;
};

// float(sumi) without SCVTF (2 cycles of one pipe on Neoverse N2, against
// 1 of either pipe for an FSUB): a sum that starts at the bits of 1.5 * 2^23
// instead of 0 reads, as a float, 1.5 * 2^23 + sumi exactly while |sumi| <
// 2^22 (there the floats are the integers; int8 sums stay below 32*128*127 <
// 2^19), and subtracting 1.5 * 2^23 is exact.
constexpr int32_t kMagicBits = 0x4B400000;
constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
static_assert(std::bit_cast<float>(kMagicBits) == kMagic);
[[gnu::always_inline]] inline float32x4_t magic_to_f32(int32x4_t sum) {
  return vsubq_f32(vreinterpretq_f32_s32(sum), vdupq_n_f32(kMagic));
}
// Sums start from these (16 vectors of kMagicBits): loaded, one address per
// sum, rather than copied from one register -- a load port instead of a
// vector pipe, as busy as the dot products. The kernels hide the pointer from
// GCC once per group (magic_sums()), so it neither merges nor hoists the loads.
alignas(64) constexpr int32_t kMagicSums[16 * 4] = {
#define TERN_M4 kMagicBits, kMagicBits, kMagicBits, kMagicBits
    TERN_M4, TERN_M4, TERN_M4, TERN_M4, TERN_M4, TERN_M4, TERN_M4, TERN_M4,
    TERN_M4, TERN_M4, TERN_M4, TERN_M4, TERN_M4, TERN_M4, TERN_M4, TERN_M4};
#undef TERN_M4
[[gnu::always_inline]] inline const int32_t* magic_sums() {
  const int32_t* p = kMagicSums;
  __asm__ volatile("" : "+r"(p));
  return p;
}
// p, opaque to GCC: loads through it are issued again rather than kept in
// registers from an earlier use (which would spill accumulators).
template <typename T>
[[gnu::always_inline]] inline const T* reload(const T* p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}
template <class Dot>
[[gnu::always_inline]] inline float32x4_t sum_to_f32(int32x4_t sum) {
  if constexpr (Dot::kMagicSums) {
    return magic_to_f32(sum);
  } else {
    return vcvtq_f32_s32(sum);
  }
}

// acc[r][h] (rows 4h..4h+3 of the tile, activation row r) += the group's
// terms, in the reference's order: fma(d_w * d_x, sumi), then fma(m, s_x).
template <class Dot, class Fmt, int R>
[[gnu::always_inline]] inline void epilogue(const typename Fmt::Block& b, const Rows& x, int g,
                                            const int32x4_t sum[R][2], float32x4_t acc[R][2]) {
  float32x4_t d[2], m[2];
  Fmt::scales(b, d, m);
  unroll<R>([&](auto r) __attribute__((always_inline)) {
    const size_t gi = size_t(r) * x.groups + g;
    const float xd = x.d[gi];
    unroll<2>([&](auto h) __attribute__((always_inline)) {
      acc[r][h] = vfmaq_f32(acc[r][h], sum_to_f32<Dot>(sum[r][h]), vmulq_n_f32(d[h], xd));
      if constexpr (Fmt::kMin) acc[r][h] = vfmaq_n_f32(acc[r][h], m[h], x.s[gi]);
    });
  });
}

// Stores the 8 outputs acc[0..1] to y, or only the first n (padding rows).
[[gnu::always_inline]] inline void store_tile(float* y, const float32x4_t acc[2], int n) {
  if (n == kTileRows) {
    vst1q_f32(y, acc[0]);
    vst1q_f32(y + 4, acc[1]);
  } else {
    float tmp[kTileRows];
    vst1q_f32(tmp, acc[0]);
    vst1q_f32(tmp + 4, acc[1]);
    std::memcpy(y, tmp, sizeof(float) * size_t(n));
  }
}

// The GEMM micro-kernel: y[r][0..n_valid) for R rows, one tile (groups blocks at blk).
template <class Dot, class Fmt, int R>
__attribute__((noinline, flatten)) void tile_kernel(const typename Fmt::Block* blk, const Rows& x,
                                                    float* y, int y_stride, int n_valid) {
  float32x4_t acc[R][2];
  unroll<R>([&](auto r)
                __attribute__((always_inline)) { acc[r][0] = acc[r][1] = vdupq_n_f32(0.0f); });
  for (int g = 0; g < x.groups; ++g) {
    TERN_MCA_BEGIN("gemm");
    const typename Fmt::Block& b = blk[g];
    prefetch_ahead(&b, kAheadGemm, Fmt::kLines);
    const int8_t* a = x.q + g * kGroup;
    typename Dot::template Sums<R, Fmt::kWide> s;
    Dot::zero(s, magic_sums());
    Fmt::template quads<Dot>(
        b, [&](auto p, const Quad& w) __attribute__((always_inline)) {
          Dot::template step<decltype(p)::value>(s, w, a, x.n_in);
        });
    int32x4_t sum[R][2];
    Dot::finish(s, sum);
    epilogue<Dot, Fmt, R>(b, x, g, sum, acc);
    TERN_MCA_END();
  }
  unroll<R>([&](auto r) __attribute__((always_inline)) {
    store_tile(y + size_t(r) * y_stride, acc[r], n_valid);
  });
}

// The SDOT GEMM micro-kernel: R rows x one tile, one half of the tile (rows
// 4h..4h+3, 8 weight registers once unpacked) at a time, so only one int32
// sum is live besides the 2R accumulators and R = 8 fits in the 32 registers
// (the generic tile_kernel keeps all 2R sums: R = 4).
template <class Dot, class Fmt, int R, int H0 = 0, int NH = 2>
__attribute__((noinline, flatten)) void tile_kernel_halves(const typename Fmt::Block* blk,
                                                           const Rows& x, float* y, int y_stride,
                                                           int n_valid) {
  float32x4_t acc[R][NH];
  unroll<R>([&](auto r) __attribute__((always_inline)) {
    unroll<NH>([&](auto i) __attribute__((always_inline)) { acc[r][i] = vdupq_n_f32(0.0f); });
  });
  for (int g = 0; g < x.groups; ++g) {
    TERN_MCA_BEGIN("gemm");
    const typename Fmt::Block& b = blk[g];
    prefetch_ahead(&b, kAheadGemm, Fmt::kLines);
    const int32_t* magic = magic_sums();
    unroll<NH>([&](auto hh) __attribute__((always_inline)) {
      constexpr int h = H0 + decltype(hh)::value;
      float32x4_t d, m;
      Fmt::half_scales(b, h, d, m);
      // W[P][j]: rows 4h..4h+3 x inputs 8P+4j..8P+4j+3 (the other half's
      // unpacking is dead code).
      int8x16_t W[4][2];
      Fmt::template quads<Dot>(
          b, [&](auto p, const Quad& w) __attribute__((always_inline)) {
            W[p][0] = w.w[h];
            W[p][1] = w.w[2 + h];
          });
      const int8_t* a = reload(x.q) + g * kGroup;
      const float* xd = reload(x.d) + g;
      const float* xs = reload(x.s) + g;
      unroll<R>([&](auto r) __attribute__((always_inline)) {
        int32x4_t s = vld1q_s32(magic + 4 * ((NH * decltype(r)::value + decltype(hh)::value) % 16));
        unroll<2>([&](auto i) __attribute__((always_inline)) {
          const int8x16_t v = vld1q_s8(a + r * x.n_in + 16 * i);  // inputs 16i..16i+15
          unroll<4>([&](auto l) __attribute__((always_inline)) {
            s = vdotq_laneq_s32(s, W[2 * i + l / 2][l % 2], v, l);
          });
        });
        const size_t gi = size_t(r) * x.groups;
        float32x4_t& c = acc[r][hh];
        c = vfmaq_f32(c, magic_to_f32(s), vmulq_n_f32(d, xd[gi]));
        if constexpr (Fmt::kMin) c = vfmaq_n_f32(c, m, xs[gi]);
      });
    });
    TERN_MCA_END();
  }
  unroll<R>([&](auto r) __attribute__((always_inline)) {
    if constexpr (NH == 2) {
      store_tile(y + size_t(r) * y_stride, acc[r], n_valid);
    } else {
      float tmp[4];
      vst1q_f32(tmp, acc[r][0]);
      std::memcpy(y + size_t(r) * y_stride + 4 * H0, tmp, sizeof(float) * size_t(n_valid - 4 * H0));
    }
  });
}

// The GEMV micro-kernel (decode, one row): NT adjacent tiles, NT independent
// accumulator chains sharing the activations, one sequential weight stream.
template <class Dot, class Fmt, int NT>
__attribute__((noinline, flatten)) void gemv_kernel(const typename Fmt::Block* blk, int tile_blocks,
                                                    const Rows& x, float* y, int n_valid_last) {
  float32x4_t acc[NT][1][2];
  const int ahead = g_gemv_prefetch;
  unroll<NT>([&](auto k) __attribute__((always_inline)) {
    acc[k][0][0] = acc[k][0][1] = vdupq_n_f32(0.0f);
  });
  for (int g = 0; g < x.groups; ++g) {
    TERN_MCA_BEGIN("gemv");
    const int8_t* a = x.q + g * kGroup;
    const int32_t* magic = magic_sums();
    unroll<NT>([&](auto k) __attribute__((always_inline)) {
      const typename Fmt::Block& b = blk[k * tile_blocks + g];
      if (ahead > 0) prefetch_ahead(&b, ahead, Fmt::kLines);
      typename Dot::template Sums<1, Fmt::kWide> s;
      Dot::zero(s, magic + 8 * k);
      Fmt::template quads<Dot>(
          b, [&](auto p, const Quad& w) __attribute__((always_inline)) {
            Dot::template step<decltype(p)::value>(s, w, a, 0);
          });
      int32x4_t sum[1][2];
      Dot::finish(s, sum);
      epilogue<Dot, Fmt, 1>(b, x, g, sum, acc[k]);
    });
    TERN_MCA_END();
  }
  unroll<NT>([&](auto k) __attribute__((always_inline)) {
    store_tile(y + k * kTileRows, acc[k][0], k == NT - 1 ? n_valid_last : kTileRows);
  });
}

// f(Int<n>{}) for a run-time n in [1, N].
template <int N, class F>
inline void with_count(int n, F&& f) {
  if constexpr (N > 1) {
    if (n == N) return f(Int<N>{});
    return with_count<N - 1>(n, f);
  } else {
    f(Int<1>{});
  }
}

template <class Dot, class Fmt, int NT>
inline void gemv_tiles(const PackedMatrix& w, int t, const Rows& x, float* y) {
  const int n_valid_last = std::min(kTileRows, w.n_out - (t + NT - 1) * kTileRows);
  gemv_kernel<Dot, Fmt, NT>(reinterpret_cast<const typename Fmt::Block*>(w.tile(t)), x.groups, x, y,
                            n_valid_last);
}

// y[r][t*8 + i] for rows [r0, r1) and tiles [t0, t1) of one format: one row
// streams Gemv::kGemvTiles tiles at a time; more rows apply each tile (in L1
// after its first use) to Gemm::kRows rows at a time.
template <class Gemm, class Gemv, class Fmt>
void gemm_format(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0, int r1, int t0,
                 int t1) {
  const int groups = w.n_groups();
  auto rows_at = [&](int r) __attribute__((always_inline)) {
    return Rows{qa.q.data() + size_t(r) * w.n_in, qa.d.data() + size_t(r) * groups,
                qa.s.data() + size_t(r) * groups, w.n_in, groups};
  };
  if (r1 - r0 == 1) {
    constexpr int NT = Gemv::kGemvTiles;
    const Rows x = rows_at(r0);
    float* yr = y + size_t(r0) * w.n_out;
    int t = t0;
    for (; t + NT <= t1; t += NT) gemv_tiles<Gemv, Fmt, NT>(w, t, x, yr + t * kTileRows);
    if (t < t1) {
      with_count<NT>(
          t1 - t, [&](auto nt) __attribute__((always_inline)) {
            gemv_tiles<Gemv, Fmt, decltype(nt)::value>(w, t, x, yr + t * kTileRows);
          });
    }
    return;
  }
  constexpr int R = Gemm::kRows;
  for (int t = t0; t < t1; ++t) {
    const int n_valid = std::min(kTileRows, w.n_out - t * kTileRows);
    const auto* blk = reinterpret_cast<const typename Fmt::Block*>(w.tile(t));
    int r = r0;
    if constexpr (Gemm::kHalves) {
      // 16 rows x one tile half at a time: 16 accumulators, as 8 rows x 8.
      for (; r + 16 <= r1; r += 16) {
        float* yr = y + size_t(r) * w.n_out + t * kTileRows;
        tile_kernel_halves<Gemm, Fmt, 16, 0, 1>(blk, rows_at(r), yr, w.n_out, std::min(4, n_valid));
        if (n_valid > 4)
          tile_kernel_halves<Gemm, Fmt, 16, 1, 1>(blk, rows_at(r), yr, w.n_out, n_valid);
      }
    }
    for (; r < r1; r += R) {
      float* yr = y + size_t(r) * w.n_out + t * kTileRows;
      with_count<R>(
          std::min(R, r1 - r), [&](auto n) __attribute__((always_inline)) {
            if constexpr (Gemm::kHalves) {
              tile_kernel_halves<Gemm, Fmt, decltype(n)::value>(blk, rows_at(r), yr, w.n_out,
                                                                n_valid);
            } else {
              tile_kernel<Gemm, Fmt, decltype(n)::value>(blk, rows_at(r), yr, w.n_out, n_valid);
            }
          });
    }
  }
}

}  // namespace
}  // namespace tern::kernels::arm

#include "gemm_float_neon.inl"

namespace tern::kernels::arm {
namespace {

// The KernelTable's gemm_tiles: Gemm's micro-kernel for two rows or more,
// Gemv's for one; float tiles their own (gemm_float_neon.inl).
template <class Gemm, class Gemv>
void gemm_tiles(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0, int r1, int t0,
                int t1) {
  switch (w.format) {
    case WeightFormat::Int4Asym:
      return gemm_format<Gemm, Gemv, Int4Fmt>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::Int5Sym:
      return gemm_format<Gemm, Gemv, Int5Fmt<Int5Block>>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::Int5Asym:
      return gemm_format<Gemm, Gemv, Int5Fmt<Int5AsymBlock>>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::Int8Sym:
      return gemm_format<Gemm, Gemv, Int8Fmt>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::Nl4:
      return gemm_format<Gemm, Gemv, Code4Fmt<WeightFormat::Nl4>>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::Fp4:
      return gemm_format<Gemm, Gemv, Code4Fmt<WeightFormat::Fp4>>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::F16:
    case WeightFormat::Bf16:
      return float_gemm_tiles(w, qa, y, r0, r1, t0, t1);
  }
}

// The SDOT policy (Armv8.2 dotprod), shared by the dotprod and i8mm tables.
// Quad order: (chunk c rows 0-3, rows 4-7, chunk c+1 rows 0-3, rows 4-7).
#ifdef __ARM_FEATURE_DOTPROD
struct SdotDot {
  static constexpr int kRows = 8, kGemvTiles = 4;
  static constexpr bool kMagicSums = true, kHalves = true;  // sums start at kMagicBits
  template <int R, bool kWide>
  struct Sums {
    int32x4_t v[R][2];
  };
  [[gnu::always_inline]] static Quad prep(int8x16_t a, int8x16_t b, int8x16_t c, int8x16_t d) {
    return Quad{{a, b, c, d}};
  }
  // The sums start at kMagicBits, loaded from magic[0 .. 8R).
  template <int R, bool W>
  [[gnu::always_inline]] static void zero(Sums<R, W>& s, const int32_t* magic) {
    unroll<R>([&](auto r) __attribute__((always_inline)) {
      s.v[r][0] = vld1q_s32(magic + 8 * r);
      s.v[r][1] = vld1q_s32(magic + 8 * r + 4);
    });
  }
  template <int P, int R, bool W>
  [[gnu::always_inline]] static void step(Sums<R, W>& s, const Quad& q, const int8_t* a,
                                          int stride) {
    unroll<R>([&](auto r) __attribute__((always_inline)) {
      const int8x8_t x = vld1_s8(a + r * stride + 8 * P);  // inputs 8P..8P+7 of row r
      unroll<2>([&](auto h) __attribute__((always_inline)) {
        s.v[r][h] = vdotq_lane_s32(s.v[r][h], q.w[h], x, 0);
        s.v[r][h] = vdotq_lane_s32(s.v[r][h], q.w[2 + h], x, 1);
      });
    });
  }
  template <int R, bool W>
  [[gnu::always_inline]] static void finish(const Sums<R, W>& s, int32x4_t out[R][2]) {
    unroll<R>([&](auto r)
                  __attribute__((always_inline)) { out[r][0] = s.v[r][0], out[r][1] = s.v[r][1]; });
  }
};
#endif

}  // namespace
}  // namespace tern::kernels::arm
