// The SDOT half of the neon-dotprod attention table (kv_attend_neon.cpp has
// the rest): exact integer dot products of a query's 15-bit codes with int8
// key rows. Built with -march=armv8.2-a+dotprod and called only when kernels'
// dispatch says the CPU has dotprod. Nothing but intrinsics here: no library
// template is instantiated with these flags (a shared instantiation the
// linker kept from this file could run on a CPU without them).
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>

namespace tern::kv {

// sums[t] = qc . ki[t] for keys t in [0, np) (np a multiple of 8), qc: hd16
// int16 codes with |c| <= 32512, ki: np rows of hd16 int8 codes (hd16 a
// multiple of 16, at most 512). A code splits exactly into c = 256 h + l
// with h = (c + 128) >> 8 in [-127, 127] and l in [-128, 127], so
// qc . k = 256 (h . k) + (l . k): two SDOTs per 16 dims, every sum exact in
// int32 (|256 (h . k)| <= 256 x 512 x 127 x 128 < 2^31).
void sdot_key_sums(const int16_t* qc, const int8_t* ki, int hd16, int np, int32_t* sums) {
  int8_t qh[512], ql[512];
  for (int j = 0; j < hd16; j += 8) {
    const int16x8_t c = vld1q_s16(qc + j);
    const int16x8_t h = vshrq_n_s16(vaddq_s16(c, vdupq_n_s16(128)), 8);
    vst1_s8(qh + j, vmovn_s16(h));
    vst1_s8(ql + j, vmovn_s16(vsubq_s16(c, vshlq_n_s16(h, 8))));
  }
  for (int k0 = 0; k0 < np; k0 += 8) {
    int32x4_t ah[8], al[8];
    for (int i = 0; i < 8; ++i) ah[i] = al[i] = vdupq_n_s32(0);
    const int8_t* kr = ki + size_t(k0) * size_t(hd16);
    for (int j = 0; j < hd16; j += 16) {
      const int8x16_t hv = vld1q_s8(qh + j), lv = vld1q_s8(ql + j);
      for (int i = 0; i < 8; ++i) {
        const int8x16_t kv = vld1q_s8(kr + size_t(i) * size_t(hd16) + j);
        ah[i] = vdotq_s32(ah[i], hv, kv);
        al[i] = vdotq_s32(al[i], lv, kv);
      }
    }
    for (int g = 0; g < 8; g += 4) {
      const int32x4_t h =
          vpaddq_s32(vpaddq_s32(ah[g], ah[g + 1]), vpaddq_s32(ah[g + 2], ah[g + 3]));
      const int32x4_t l =
          vpaddq_s32(vpaddq_s32(al[g], al[g + 1]), vpaddq_s32(al[g + 2], al[g + 3]));
      vst1q_s32(sums + k0 + g, vaddq_s32(vshlq_n_s32(h, 8), l));
    }
  }
}

}  // namespace tern::kv
