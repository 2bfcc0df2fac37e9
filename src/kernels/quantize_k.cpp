// Quantizers of the K-quants Q4_K, Q5_K (x ~= d*sc*q - dmin*mn per sub-block
// of 32, q in 0..15 / 0..31, 6-bit sc and mn) and Q6_K (x ~= d*sc*(q-32) per
// sub-block of 16, int8 sc). Layouts: dequant.h and dequant_ref.cpp.
//
// Each sub-block's real scale (and min) is the best of a few starting ranges,
// each refitted twice by least squares over the codes it rounds to; then the
// super-block scales map the largest onto the top 6-bit (int8) code, and the
// codes are rounded against the scales as the decoder will see them.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quantize_lowbit.h"
#include "tern/core/half.h"
#include "tern/kernels/dequant.h"

namespace tern::kernels {
namespace {

int round_clamp(float v, int lo, int hi) {
  return std::clamp(int(std::lround(v)), lo, hi);
}

struct Affine {
  float sc = 0, mn = 0;  // x ~= sc * q - mn, mn >= 0
};

// The squared error of x[0..n) coded as sc * q - mn (q in 0..nmax, rounded).
float affine_error(const float* x, int n, int nmax, Affine a, int* q) {
  const float id = a.sc > 0 ? 1.0f / a.sc : 0.0f;
  float err = 0;
  for (int j = 0; j < n; ++j) {
    q[j] = round_clamp((x[j] + a.mn) * id, 0, nmax);
    const float d = x[j] - (a.sc * float(q[j]) - a.mn);
    err += d * d;
  }
  return err;
}

// Least squares sc, m of x ~= sc * q + m, with m <= 0 (mn = -m >= 0).
Affine refit(const float* x, const int* q, int n) {
  float sq = 0, sqq = 0, sx = 0, sxq = 0;
  for (int j = 0; j < n; ++j) {
    sq += float(q[j]), sqq += float(q[j] * q[j]), sx += x[j], sxq += x[j] * float(q[j]);
  }
  const float det = float(n) * sqq - sq * sq;
  if (det > 0) {
    const float sc = (float(n) * sxq - sq * sx) / det;
    const float m = (sx - sc * sq) / float(n);
    if (m <= 0 && sc > 0) return {sc, -m};
  }
  return {sqq > 0 ? std::max(0.0f, sxq / sqq) : 0.0f, 0.0f};
}

Affine fit_affine(const float* x, int n, int nmax) {
  float lo = 0, hi = x[0];
  for (int j = 0; j < n; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  if (hi <= lo) return {0, -lo};
  int q[32];
  Affine best{(hi - lo) / float(nmax), -lo};
  float best_err = affine_error(x, n, nmax, best, q);
  for (float f : {1.0f, 0.9f, 0.8f}) {
    Affine a{(hi - lo) * f / float(nmax), -lo};
    for (int it = 0; it < 2; ++it) {
      affine_error(x, n, nmax, a, q);
      a = refit(x, q, n);
      const float err = affine_error(x, n, nmax, a, q);
      if (err < best_err) best_err = err, best = a;
    }
  }
  return best;
}

void pack_k_scales(const int* ls, const int* lm, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = uint8_t(s[j] | ls[j]);
      s[j + 4] = uint8_t(s[j + 4] | lm[j]);
    } else {
      s[j + 4] = uint8_t((ls[j] & 15) | ((lm[j] & 15) << 4));
      s[j - 4] = uint8_t(s[j - 4] | ((ls[j] >> 4) << 6));
      s[j] = uint8_t(s[j] | ((lm[j] >> 4) << 6));
    }
  }
}

// Q4_K (nmax 15) and Q5_K (nmax 31): the 256 codes of one super-block, with
// d, dmin (fp16) and the packed scales written into b's fields.
void code_k_affine(const float* x, int nmax, uint8_t* d, uint8_t* dmin, uint8_t* scales, int* q) {
  Affine a[8];
  float max_sc = 0, max_mn = 0;
  for (int s = 0; s < 8; ++s) {
    a[s] = fit_affine(x + 32 * s, 32, nmax);
    max_sc = std::max(max_sc, a[s].sc), max_mn = std::max(max_mn, a[s].mn);
  }
  const uint16_t d16 = f32_to_fp16(max_sc / 63.0f), m16 = f32_to_fp16(max_mn / 63.0f);
  std::memcpy(d, &d16, 2), std::memcpy(dmin, &m16, 2);
  const float df = fp16_to_f32(d16), mf = fp16_to_f32(m16);
  int ls[8], lm[8];
  for (int s = 0; s < 8; ++s) {
    ls[s] = df > 0 ? round_clamp(a[s].sc / df, 0, 63) : 0;
    lm[s] = mf > 0 ? round_clamp(a[s].mn / mf, 0, 63) : 0;
    affine_error(x + 32 * s, 32, nmax, {df * float(ls[s]), mf * float(lm[s])}, q + 32 * s);
  }
  pack_k_scales(ls, lm, scales);
}

void quant_q4_k(const float* x, uint8_t* p, int64_t nb) {
  auto* b = reinterpret_cast<block::Q4_K*>(p);
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    int q[256];
    code_k_affine(x, 15, b[i].d, b[i].dmin, b[i].scales, q);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        b[i].qs[32 * c + l] = uint8_t(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
  }
}

void quant_q5_k(const float* x, uint8_t* p, int64_t nb) {
  auto* b = reinterpret_cast<block::Q5_K*>(p);
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    int q[256];
    code_k_affine(x, 31, b[i].d, b[i].dmin, b[i].scales, q);
    std::memset(b[i].qh, 0, 32);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        b[i].qs[32 * c + l] = uint8_t((q[64 * c + l] & 15) | ((q[64 * c + 32 + l] & 15) << 4));
    for (int s = 0; s < 8; ++s)
      for (int l = 0; l < 32; ++l)
        b[i].qh[l] = uint8_t(b[i].qh[l] | (((q[32 * s + l] >> 4) & 1) << s));
  }
}

// Q6_K's real scale of 16 values: the largest magnitude on -32, or a smaller
// range refitted (sc = sum x q / sum q q), whichever codes with less error.
float fit_q6(const float* x) {
  float amax = 0, max = 0;
  for (int j = 0; j < 16; ++j)
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
  if (amax == 0) return 0;
  float best = max / -32.0f, best_err = -1;
  for (float f : {1.0f, 0.95f, 0.9f}) {
    float sc = max / -32.0f * f;
    for (int it = 0; it < 2; ++it) {
      float sxq = 0, sqq = 0, err = 0;
      for (int j = 0; j < 16; ++j) {
        const int q = round_clamp(x[j] / sc, -32, 31);
        sxq += x[j] * float(q), sqq += float(q * q);
        err += (x[j] - sc * float(q)) * (x[j] - sc * float(q));
      }
      if (best_err < 0 || err < best_err) best_err = err, best = sc;
      if (sqq <= 0 || sxq == 0) break;
      sc = sxq / sqq;
    }
  }
  return best;
}

void quant_q6_k(const float* x, uint8_t* p, int64_t nb) {
  auto* b = reinterpret_cast<block::Q6_K*>(p);
  for (int64_t i = 0; i < nb; ++i, x += 256) {
    float sc[16], amax = 0;
    for (int s = 0; s < 16; ++s)
      sc[s] = fit_q6(x + 16 * s), amax = std::max(amax, std::fabs(sc[s]));
    const uint16_t d16 = f32_to_fp16(amax / 127.0f);
    std::memcpy(b[i].d, &d16, 2);
    const float d = fp16_to_f32(d16);
    std::memset(b[i].ql, 0, 128);
    std::memset(b[i].qh, 0, 64);
    for (int s = 0; s < 16; ++s) {
      const int ls = d > 0 ? round_clamp(sc[s] / d, -128, 127) : 0;
      b[i].scales[s] = int8_t(ls);
      const float dl = d * float(ls);
      for (int j = 0; j < 16; ++j) {
        const int e = 16 * s + j;
        const int q = (dl != 0 ? round_clamp(x[e] / dl, -32, 31) : 0) + 32;
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        uint8_t& lo = b[i].ql[64 * h + l + 32 * (k & 1)];
        lo = uint8_t(lo | ((q & 15) << (k < 2 ? 0 : 4)));
        b[i].qh[32 * h + l] = uint8_t(b[i].qh[32 * h + l] | ((q >> 4) << (2 * k)));
      }
    }
  }
}

}  // namespace

bool is_k_search_type(DType t) {
  return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

void quantize_k_search(DType t, const float* x, uint8_t* dst, int64_t nb) {
  if (t == DType::Q4_K) quant_q4_k(x, dst, nb);
  if (t == DType::Q5_K) quant_q5_k(x, dst, nb);
  if (t == DType::Q6_K) quant_q6_k(x, dst, nb);
}

}  // namespace tern::kernels
