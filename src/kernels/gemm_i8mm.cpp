// The NEON + SMMLA kernel table (Armv8.6 i8mm: Neoverse V1/N2, Cortex-A710 on,
// Apple M2 on). SMMLA multiplies a 2x8 int8 matrix by an 8x2 one into a 2x2
// int32 block: here 2 activation rows by 2 weight rows over 8 consecutive
// inputs, 32 multiply-adds, twice SDOT's 16. One row (decode) would waste half
// of every SMMLA, so the GEMV is the SDOT one. Compiled with
// -march=armv8.2-a+dotprod+i8mm; chosen only when HWCAP2_I8MM says so.
//
// The GEMM (two rows or more) has micro-kernels of its own (gemm_neon.inl's
// design comment has the numbers):
//  - Activation pairs. Once per call, the task's rows are copied pairwise into
//    SMMLA's A order (PairGroup: rows a, b x 8 inputs per 16 bytes, with the
//    scales duplicated as (d_a, d_a, d_b, d_b)), so an A operand is one load
//    and the epilogue's scale vectors are loads too: no lane inserts. The copy
//    is paid once per task and used by every tile of it.
//  - fp32 accumulators in SMMLA's native 2x2 layout: acc[p][k] holds
//    activation rows (2p, 2p+1) x tile rows (2k, 2k+1), lanes (a w0, a w1,
//    b w0, b w1). The weight scales are duplicated to match once per tile and
//    group ((d_2k, d_2k+1, d_2k, d_2k+1), shared by every pair); the
//    accumulators are un-permuted once, at the store.
//  - The group is walked one weight row pair k at a time: 4 B operands (zips
//    and nibble unpacking of the raw chunks), then for each activation pair 4
//    SMMLAs into one int32 sum and its epilogue. Only one sum and 4 B
//    registers are live besides the accumulators, so 8 pairs x 2 weight row
//    pairs (16 rows x 4 channels, the tile in two passes) or 4 pairs x 4
//    (8 rows x 8 channels) fit: the weight unpacking, a fixed cost per weight
//    byte, is shared by 16 or 8 rows instead of 4. The activations, scales
//    and raw weight chunks are loaded again for each k rather than kept
//    (loads have 3 ports on N2, the vector pipes are the bound).
// A PairGroup is 96 bytes for 64 bytes of activations: a task's copy (8 rows
// of 4096 inputs: 48 KB) still fits the 64 KB L1 of an N2 next to a tile.
#include <vector>

#include "dispatch.h"
#include "gemm_neon.inl"
#include "ops_neon.h"

namespace tern::kernels {
namespace arm {
namespace {

// One group of activation rows a, b (a pair) in SMMLA's operand order.
struct PairGroup {
  int8_t q[4][16];  // q[P]: inputs 8P..8P+7 of row a, then of row b
  float d[4];       // (d_a, d_a, d_b, d_b)
  float s[4];       // (s_a, s_a, s_b, s_b)
};
static_assert(sizeof(PairGroup) == 96);

// out[p * groups + g]: rows r0 + 2p, r0 + 2p + 1; an odd last row is paired
// with zeros (its outputs are computed and dropped).
void pack_pairs(const QuantizedActs& qa, int n_in, int r0, int r1, std::vector<PairGroup>& out) {
  const int groups = n_in / kGroup, pairs = (r1 - r0 + 1) / 2;
  if (out.size() < size_t(pairs) * groups) out.resize(size_t(pairs) * groups);
  for (int p = 0; p < pairs; ++p) {
    const int ra = r0 + 2 * p, rb = ra + 1;
    const bool has_b = rb < r1;
    for (int g = 0; g < groups; ++g) {
      PairGroup& o = out[size_t(p) * groups + g];
      const int8_t* qa_a = qa.q.data() + size_t(ra) * n_in + g * kGroup;
      const int8x16_t a0 = vld1q_s8(qa_a), a1 = vld1q_s8(qa_a + 16);
      int8x16_t b0 = vdupq_n_s8(0), b1 = b0;
      float db = 0.0f, sb = 0.0f;
      if (has_b) {
        const int8_t* qa_b = qa.q.data() + size_t(rb) * n_in + g * kGroup;
        b0 = vld1q_s8(qa_b), b1 = vld1q_s8(qa_b + 16);
        db = qa.d[size_t(rb) * groups + g], sb = qa.s[size_t(rb) * groups + g];
      }
      auto zip = [](int8x16_t x, int8x16_t y, auto hi) {
        const int64x2_t a = vreinterpretq_s64_s8(x), b = vreinterpretq_s64_s8(y);
        return vreinterpretq_s8_s64(hi ? vzip2q_s64(a, b) : vzip1q_s64(a, b));
      };
      vst1q_s8(o.q[0], zip(a0, b0, false));
      vst1q_s8(o.q[1], zip(a0, b0, true));
      vst1q_s8(o.q[2], zip(a1, b1, false));
      vst1q_s8(o.q[3], zip(a1, b1, true));
      const float da = qa.d[size_t(ra) * groups + g], sa = qa.s[size_t(ra) * groups + g];
      o.d[0] = o.d[1] = da, o.d[2] = o.d[3] = db;
      o.s[0] = o.s[1] = sa, o.s[2] = o.s[3] = sb;
    }
  }
}

[[gnu::always_inline]] inline int8x16_t zip32(int8x16_t a, int8x16_t b, bool hi) {
  const int32x4_t x = vreinterpretq_s32_s8(a), y = vreinterpretq_s32_s8(b);
  return vreinterpretq_s8_s32(hi ? vzip2q_s32(x, y) : vzip1q_s32(x, y));
}
[[gnu::always_inline]] inline int8x16_t load16(const void* p) {
  return vld1q_s8(static_cast<const int8_t*>(p));
}
// Lanes (v[2j], v[2j+1], v[2j], v[2j+1]).
template <int J>
[[gnu::always_inline]] inline float32x4_t dup_pair(float32x4_t v) {
  return vreinterpretq_f32_f64(vdupq_laneq_f64(vreinterpretq_f64_f32(v), J));
}

// The SMMLA B operands of one weight row pair: B[P] = tile rows 2K, 2K+1 x
// inputs 8P..8P+7 (chunks 2P, 2P+1 zipped; int4/int5: the low nibbles of
// chunks c, c+1 are inputs 8(c/2).., their high nibbles inputs 16 + 8(c/2)..).
// scales(b, h, d, m): tile rows 4h..4h+3's d and m (the minimum term) as fp32.
// The nibbles of an Int4Block's or Code4Block's q (the same layout) as B
// operands, each passed through map (the codes as they are, or a lookup).
template <int K, class Map>
[[gnu::always_inline]] inline void nibble_weights(const uint8_t (&q)[4][kTileRows][4],
                                                  int8x16_t B[4], Map map) {
  constexpr int h = K / 2;
  const uint8x16_t mask = vdupq_n_u8(0x0f);
  unroll<2>([&](auto j) __attribute__((always_inline)) {
    constexpr int c = 2 * decltype(j)::value;
    const uint8x16_t z =
        vreinterpretq_u8_s8(zip32(load16(&q[c][4 * h][0]), load16(&q[c + 1][4 * h][0]), K % 2));
    B[j] = map(vandq_u8(z, mask));
    B[2 + j] = map(vshrq_n_u8(z, 4));
  });
}

struct MmInt4 : Int4Fmt {
  using Block = Int4Block;
  static constexpr bool kMin = true;
  template <int K>
  [[gnu::always_inline]] static void weights(const Block& b, int8x16_t B[4]) {
    nibble_weights<K>(
        b.q, B, [](uint8x16_t v) __attribute__((always_inline)) { return vreinterpretq_s8_u8(v); });
  }
};

struct MmInt8 : Int8Fmt {
  using Block = Int8Block;
  static constexpr bool kMin = false;
  template <int K>
  [[gnu::always_inline]] static void weights(const Block& b, int8x16_t B[4]) {
    constexpr int h = K / 2;
    unroll<4>([&](auto P) __attribute__((always_inline)) {
      constexpr int c = 2 * decltype(P)::value;
      B[P] = zip32(load16(&b.q[c][4 * h][0]), load16(&b.q[c + 1][4 * h][0]), K % 2);
    });
  }
};

// Nl4 / Fp4: MmInt4's zipped nibbles looked up in the codebook (tbl).
template <WeightFormat kFormat>
struct MmCode4 : Code4Fmt<kFormat> {
  using Block = Code4Block;
  static constexpr bool kMin = false;
  template <int K>
  [[gnu::always_inline]] static void weights(const Block& b, int8x16_t B[4]) {
    const int8x16_t tbl = Code4Fmt<kFormat>::table();
    nibble_weights<K>(
        b.q, B, [tbl](uint8x16_t v) __attribute__((always_inline)) { return vqtbl1q_s8(tbl, v); });
  }
};

// qh has chunk c's bit 4 at bit c (low nibbles) and 4 + c (high nibbles) of
// the byte in chunk position. Zipped like the chunks, with qh >> 1 in the
// positions of chunk c + 1, one right shift by c (c = 0, 2; none for 0)
// serves both nibbles of both chunks, and no shift counts take registers.
// Block5: Int5Block (Int5Sym) or Int5AsymBlock (Int5Asym); Int5Fmt gives the
// scales.
template <class Block5>
struct MmInt5 : Int5Fmt<Block5> {
  using Block = Block5;
  static constexpr bool kMin = true;
  template <int K>
  [[gnu::always_inline]] static void weights(const Block& b, int8x16_t B[4]) {
    constexpr int h = K / 2;
    const uint8x16_t m1f = vdupq_n_u8(0x1f), m10 = vdupq_n_u8(0x10);
    const int8x16_t qh = load16(&b.qh[4 * h][0]);
    const int8x16_t qh1 = vreinterpretq_s8_u8(vshrq_n_u8(vreinterpretq_u8_s8(qh), 1));
    const uint8x16_t hz = vreinterpretq_u8_s8(zip32(qh, qh1, K % 2));
    unroll<2>([&](auto j) __attribute__((always_inline)) {
      constexpr int c = 2 * decltype(j)::value;
      const uint8x16_t u = vreinterpretq_u8_s8(
          zip32(load16(&b.q[c][4 * h][0]), load16(&b.q[c + 1][4 * h][0]), K % 2));
      uint8x16_t t = hz;  // qh >> c or c + 1
      if constexpr (c != 0) t = vshrq_n_u8(hz, c);
      B[2 + j] = vreinterpretq_s8_u8(vsriq_n_u8(vandq_u8(t, m10), u, 4));  // before SLI
      B[j] = vreinterpretq_s8_u8(vandq_u8(vsliq_n_u8(u, t, 4), m1f));      // overwrites u
    });
  }
};

// NP activation pairs x tile rows 2K0 .. 2(K0 + NK) - 1 (NK weight row pairs)
// of one tile: y[r][2K0 ..) for the first `rows` rows, channels < n_valid.
template <class Fmt, int NP, int K0, int NK>
__attribute__((noinline, flatten)) void mm_kernel(const typename Fmt::Block* blk,
                                                  const PairGroup* x, int groups, float* y,
                                                  int y_stride, int rows, int n_valid) {
  float32x4_t acc[NP][NK];
  unroll<NP>([&](auto p) __attribute__((always_inline)) {
    unroll<NK>([&](auto k) __attribute__((always_inline)) { acc[p][k] = vdupq_n_f32(0.0f); });
  });
  for (int g = 0; g < groups; ++g) {
    TERN_MCA_BEGIN("gemm");
    const typename Fmt::Block& b = blk[g];
    prefetch_ahead(&b, kAheadGemm, int(sizeof(b) + 63) / 64);
    const PairGroup* xg = x + g;
    // The sums start at kMagicBits, loaded (a load port) rather than copied
    // from a register (a vector pipe, as busy as the SMMLAs): one address per
    // sum, which GCC cannot see through, so it neither merges the loads nor
    // hoists them out of the loop.
    const int32_t* magic = magic_sums();
    float32x4_t dh = vdupq_n_f32(0.0f), mh = dh;
    unroll<NK>([&](auto kk) __attribute__((always_inline)) {
      constexpr int K = K0 + decltype(kk)::value;
      if constexpr (K % 2 == 0 || K == K0) Fmt::half_scales(b, K / 2, dh, mh);
      const float32x4_t dk = dup_pair<K % 2>(dh), mk = dup_pair<K % 2>(mh);
      // Each weight row pair loads its raw chunks again (the zip1 and zip2
      // of one pair of loads are for different k: kept, they need registers).
      int8x16_t B[4];
      Fmt::template weights<K>(*reload(&b), B);
      // The activations are loaded again for each weight row pair: GCC would
      // otherwise keep the first pairs' in registers and spill accumulators.
      const PairGroup* xk = reload(xg);
      unroll<NP>([&](auto p) __attribute__((always_inline)) {
        const PairGroup& xp = xk[size_t(p) * groups];
        int32x4_t s = vld1q_s32(magic + 4 * (decltype(p)::value * NK + decltype(kk)::value));
        unroll<4>([&](auto P) __attribute__((always_inline)) {
          s = vmmlaq_s32(s, vld1q_s8(xp.q[P]), B[P]);
        });
        float32x4_t& a = acc[p][kk];
        a = vfmaq_f32(a, magic_to_f32(s), vmulq_f32(dk, vld1q_f32(xp.d)));
        if constexpr (Fmt::kMin) a = vfmaq_f32(a, mk, vld1q_f32(xp.s));
      });
    });
    TERN_MCA_END();
  }
  // Un-permute: row 2p's channels 2K, 2K + 1 are lanes 0, 1 of acc[p][K - K0],
  // row 2p + 1's lanes 2, 3.
  const int c0 = 2 * K0, n = std::min(2 * NK, n_valid - c0);
  if (n <= 0) return;
  unroll<NP>([&](auto p) __attribute__((always_inline)) {
    float out[2][2 * NK];
    unroll<NK / 2>([&](auto j) __attribute__((always_inline)) {
      const float64x2_t u = vreinterpretq_f64_f32(acc[p][2 * j]);
      const float64x2_t v = vreinterpretq_f64_f32(acc[p][2 * j + 1]);
      vst1q_f32(out[0] + 4 * j, vreinterpretq_f32_f64(vzip1q_f64(u, v)));
      vst1q_f32(out[1] + 4 * j, vreinterpretq_f32_f64(vzip2q_f64(u, v)));
    });
    unroll<2>([&](auto i) __attribute__((always_inline)) {
      const int r = 2 * p + i;
      if (r < rows) std::memcpy(y + size_t(r) * y_stride + c0, out[i], sizeof(float) * size_t(n));
    });
  });
}

// y[r][t*8 + i] for rows [r0, r1) (two or more) and tiles [t0, t1).
template <class Fmt>
void mm_format(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0, int r1, int t0,
               int t1) {
  const int groups = w.n_groups(), pairs = (r1 - r0 + 1) / 2;
  thread_local std::vector<PairGroup> buffer;
  std::vector<PairGroup>& xp = buffer;
  pack_pairs(qa, w.n_in, r0, r1, xp);
  for (int t = t0; t < t1; ++t) {
    const int n_valid = std::min(kTileRows, w.n_out - t * kTileRows);
    const auto* blk = reinterpret_cast<const typename Fmt::Block*>(w.tile(t));
    float* yt = y + size_t(r0) * w.n_out + t * kTileRows;
    auto call = [&](auto kernel, int p) __attribute__((always_inline)) {
      kernel(blk, xp.data() + size_t(p) * groups, groups, yt + size_t(2 * p) * w.n_out, w.n_out,
             r1 - r0 - 2 * p, n_valid);
    };
    int p = 0;
    for (; p + 8 <= pairs; p += 8) {
      call(mm_kernel<Fmt, 8, 0, 2>, p);
      if (n_valid > 4) call(mm_kernel<Fmt, 8, 2, 2>, p);
    }
    for (; p + 4 <= pairs; p += 4) call(mm_kernel<Fmt, 4, 0, 4>, p);
    if (p < pairs) {
      with_count<3>(
          pairs - p, [&](auto np) __attribute__((always_inline)) {
            call(mm_kernel<Fmt, decltype(np)::value, 0, 4>, p);
          });
    }
  }
}

void gemm_tiles_i8mm(const PackedMatrix& w, const QuantizedActs& qa, float* y, int r0, int r1,
                     int t0, int t1) {
  if (r1 - r0 == 1) return gemm_tiles<SdotDot, SdotDot>(w, qa, y, r0, r1, t0, t1);
  switch (w.format) {
    case WeightFormat::Int4Asym:
      return mm_format<MmInt4>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::Int5Sym:
      return mm_format<MmInt5<Int5Block>>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::Int5Asym:
      return mm_format<MmInt5<Int5AsymBlock>>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::Int8Sym:
      return mm_format<MmInt8>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::Nl4:
      return mm_format<MmCode4<WeightFormat::Nl4>>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::Fp4:
      return mm_format<MmCode4<WeightFormat::Fp4>>(w, qa, y, r0, r1, t0, t1);
    case WeightFormat::F16:
    case WeightFormat::Bf16:
      return float_gemm_tiles(w, qa, y, r0, r1, t0, t1);
  }
}

}  // namespace
}  // namespace arm

const KernelTable* i8mm_kernels() {
  static const KernelTable t = neon::table("neon-i8mm", arm::gemm_tiles_i8mm);
  return &t;
}

}  // namespace tern::kernels
