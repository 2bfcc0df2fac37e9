// Quantizers of the lattice types (layouts: iq_codes.h). A value is
//
//   x ~= D * unit * (2s + 1) * w,   w = sign * g (IQ2, IQ3) or 8g +- 1 (IQ1)
//
// with D the block's fp16 scale, s a sub-block's 4-bit (IQ1: 3-bit) scale and
// g a grid entry's coordinate. Per block of 256:
//
//  1. Signs (IQ2, IQ3) come from the data. Where the format stores 7 sign
//     bits (IQ2_XXS, IQ2_XS, IQ3_XXS) a chunk of 8 must have an even count of
//     negatives; if it is odd, the element of smallest magnitude is flipped
//     (its target becomes -|x|, so the search gives it the smallest level).
//  2. Each sub-block gets the best real scale of a few candidates (largest
//     target on a fraction of the largest grid value), each refitted by least
//     squares over the grid points it chose.
//  3. D maps the largest sub-block scale onto 2 smax + 1; each s is the
//     nearest odd multiple or a neighbour, whichever codes with less error.
//  4. Codes: per chunk, the grid entry nearest its targets under the final
//     scale (IQ1: with the better delta sign per delta group).
//
// The grid search rounds each coordinate to its nearest level, giving a point
// of the full lattice (levels^dim, at most 6561 points), and tries the grid
// entries nearest that point (a table made once per grid by brute force).
// Only + - * / and comparisons: the bytes do not depend on the libm or the
// ISA (aarch64 builds with -ffp-contract=off).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "iq_grids.h"
#include "quantize_lowbit.h"
#include "tern/core/half.h"

namespace tern::kernels {
namespace {

constexpr int kNear = 8;  // grid entries tried per lattice point

// A grid as a subset of the lattice level^dim.
struct Lattice {
  int dim = 8;
  int n_levels = 3;
  float level[8] = {};         // per-coordinate values, ascending
  float mid[8] = {};           // midpoints between neighbouring levels
  float vmax = 0;              // largest |value| of a coordinate
  std::vector<float> entry;    // n_entries x dim
  std::vector<uint16_t> near;  // n_points x kNear entry indices, nearest first
};

template <typename ValueOf>
Lattice build_lattice(int dim, std::initializer_list<int> levels, int n_entries, ValueOf value) {
  Lattice L;
  L.dim = dim;
  L.n_levels = int(levels.size());
  int k = 0;
  for (int v : levels) L.level[k++] = float(v);
  for (int l = 0; l + 1 < L.n_levels; ++l) L.mid[l] = 0.5f * (L.level[l] + L.level[l + 1]);
  L.vmax = std::max(std::fabs(L.level[0]), std::fabs(L.level[L.n_levels - 1]));
  L.entry.resize(size_t(n_entries) * dim);
  for (int e = 0; e < n_entries; ++e)
    for (int j = 0; j < dim; ++j) L.entry[size_t(e) * dim + j] = float(value(e, j));
  int n_points = 1;
  for (int j = 0; j < dim; ++j) n_points *= L.n_levels;
  L.near.resize(size_t(n_points) * kNear);
  std::vector<std::pair<float, int>> dist(n_entries);
  for (int p = 0; p < n_points; ++p) {
    float point[8];
    for (int j = 0, c = p; j < dim; ++j, c /= L.n_levels) point[j] = L.level[c % L.n_levels];
    for (int e = 0; e < n_entries; ++e) {
      float s = 0;
      for (int j = 0; j < dim; ++j) {
        const float d = point[j] - L.entry[size_t(e) * dim + j];
        s += d * d;
      }
      dist[e] = {s, e};
    }
    std::partial_sort(dist.begin(), dist.begin() + kNear, dist.end());  // ties: lower index
    for (int c = 0; c < kNear; ++c) L.near[size_t(p) * kNear + c] = uint16_t(dist[c].second);
  }
  return L;
}

template <typename Entry>
auto unsigned_bytes(const Entry* grid) {
  return [grid](int e, int j) { return iq::grid_byte(grid[e], j); };
}

const Lattice& lattice_for(DType t) {
  static const Lattice iq2xxs = build_lattice(8, {8, 25, 43}, 256, unsigned_bytes(iq::kIq2xxsGrid));
  static const Lattice iq2xs = build_lattice(8, {8, 25, 43}, 512, unsigned_bytes(iq::kIq2xsGrid));
  static const Lattice iq2s = build_lattice(8, {8, 25, 43}, 1024, unsigned_bytes(iq::kIq2sGrid));
  static const Lattice iq3xxs =
      build_lattice(4, {4, 12, 20, 28, 36, 44, 52, 62}, 256, unsigned_bytes(iq::kIq3xxsGrid));
  static const Lattice iq3s =
      build_lattice(4, {1, 3, 5, 7, 9, 11, 13, 15}, 512, unsigned_bytes(iq::kIq3sGrid));
  static const Lattice iq1 = build_lattice(8, {-1, 0, 1}, 2048, [](int e, int j) {
    return int(int8_t(iq::grid_byte(iq::kIq1sGrid[e], j)));
  });
  switch (t) {
    case DType::IQ2_XXS:
      return iq2xxs;
    case DType::IQ2_XS:
      return iq2xs;
    case DType::IQ2_S:
      return iq2s;
    case DType::IQ3_XXS:
      return iq3xxs;
    case DType::IQ3_S:
      return iq3s;
    default:
      return iq1;
  }
}

enum class Signs { kParity, kFull, kNone };

struct Spec {
  const Lattice* lat;
  int span;    // elements per sub-block scale: 16 or 32
  int smax;    // largest sub-block scale code: 15 (4 bits) or 7 (3 bits)
  float unit;  // x = D * unit * (2s+1) * w
  Signs signs;
  int delta_span;  // IQ1: chunks of 8 sharing a delta sign (0: no delta)
};

Spec spec_for(DType t) {
  const Lattice* L = &lattice_for(t);
  switch (t) {
    case DType::IQ2_XXS:
      return {L, 32, 15, 0.125f, Signs::kParity, 0};
    case DType::IQ2_XS:
      return {L, 16, 15, 0.125f, Signs::kParity, 0};
    case DType::IQ2_S:
      return {L, 16, 15, 0.125f, Signs::kFull, 0};
    case DType::IQ3_XXS:
      return {L, 32, 15, 0.25f, Signs::kParity, 0};
    case DType::IQ3_S:
      return {L, 32, 15, 1.0f, Signs::kFull, 0};
    case DType::IQ1_S:
      return {L, 32, 7, 0.125f, Signs::kNone, 4};
    default:  // IQ1_M
      return {L, 16, 7, 0.125f, Signs::kNone, 1};
  }
}

// The codes of one chunk of 8 elements.
struct Chunk {
  uint16_t idx[2] = {0, 0};  // grid entries (the second for 4-value grids)
  uint8_t signs = 0;         // bit j set: element j negative
  bool neg_delta = false;    // IQ1
};

// The entry whose values v, reconstructed as a * v + b, are nearest t[0..dim);
// its squared error goes to *err.
int nearest_entry(const Lattice& L, const float* t, const float* wt, float a, float b, float* err) {
  const float ia = a > 0 ? 1.0f / a : 0.0f;
  int code = 0;
  for (int j = 0, mul = 1; j < L.dim; ++j, mul *= L.n_levels) {
    const float u = (t[j] - b) * ia;
    int l = 0;
    while (l + 1 < L.n_levels && u > L.mid[l]) ++l;
    code += l * mul;
  }
  int best = 0;
  float best_err = 0;
  for (int c = 0; c < kNear; ++c) {
    const int e = L.near[size_t(code) * kNear + c];
    const float* v = &L.entry[size_t(e) * L.dim];
    float s = 0;
    for (int j = 0; j < L.dim; ++j) {
      const float d = t[j] - (a * v[j] + b);
      s += wt[j] * d * d;
    }
    if (c == 0 || s < best_err) best = e, best_err = s;
  }
  *err = best_err;
  return best;
}

// Sums over coded elements: error at the scale used, and t*w, w*w for a
// least-squares refit of the scale.
struct Fit {
  float err = 0, tw = 0, ww = 0;
};

// The weights w of a chunk's codes (targets are t ~= dl * w).
void chunk_weights(const Spec& sp, const Chunk& c, float* w) {
  const Lattice& L = *sp.lat;
  for (int h = 0; h < 8 / L.dim; ++h) {
    for (int j = 0; j < L.dim; ++j) {
      const float v = L.entry[size_t(c.idx[h]) * L.dim + j];
      w[h * L.dim + j] = sp.delta_span ? 8.0f * v + (c.neg_delta ? -1.0f : 1.0f) : v;
    }
  }
}

// Codes n targets (n / 8 chunks) under the sub-block scale dl.
Fit code_sub(const Spec& sp, const float* t, const float* wt, int n, float dl, Chunk* out) {
  const Lattice& L = *sp.lat;
  Fit f;
  auto code_chunk = [&](const float* tc, const float* wc, Chunk& c, float delta) {
    float err = 0;
    for (int h = 0; h < 8 / L.dim; ++h) {
      float e = 0;
      const int at = h * L.dim;
      c.idx[h] = uint16_t(sp.delta_span ? nearest_entry(L, tc + at, wc + at, 8 * dl, delta * dl, &e)
                                        : nearest_entry(L, tc + at, wc + at, dl, 0, &e));
      err += e;
    }
    c.neg_delta = delta < 0;
    return err;
  };
  const int group = sp.delta_span ? 8 * sp.delta_span : 8;
  for (int g0 = 0; g0 < n; g0 += group) {
    Chunk* c = out + g0 / 8;
    float err = 0;
    for (int k = 0; k < group; k += 8) err += code_chunk(t + g0 + k, wt + g0 + k, c[k / 8], 1.0f);
    if (sp.delta_span) {  // the other delta sign, kept if better
      Chunk alt[4];
      float alt_err = 0;
      for (int k = 0; k < group; k += 8) {
        alt[k / 8].signs = c[k / 8].signs;
        alt_err += code_chunk(t + g0 + k, wt + g0 + k, alt[k / 8], -1.0f);
      }
      if (alt_err < err) std::copy(alt, alt + group / 8, c), err = alt_err;
    }
    f.err += err;
    for (int k = 0; k < group; k += 8) {
      float w[8];
      chunk_weights(sp, c[k / 8], w);
      for (int j = 0; j < 8; ++j) {
        const float wj = wt[g0 + k + j];
        f.tw += wj * t[g0 + k + j] * w[j], f.ww += wj * w[j] * w[j];
      }
    }
  }
  return f;
}

// The sub-block scale with the least error of a few candidates, each refitted.
float fit_scale(const Spec& sp, const float* t, const float* wt, int n, Chunk* scratch) {
  float amax = 0, tt = 0;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(t[j])), tt += wt[j] * t[j] * t[j];
  if (amax == 0) return 0;
  const float vmax = sp.delta_span ? 9.0f : sp.lat->vmax;
  float best_dl = amax / vmax, best_err = -1;
  for (int k = 0; k < 8; ++k) {
    const float dl = amax / vmax * (0.55f + 0.1f * float(k));
    const Fit f = code_sub(sp, t, wt, n, dl, scratch);
    if (f.ww <= 0 || f.tw <= 0) continue;
    const float refit = f.tw / f.ww;
    const float err = tt - f.tw * refit;  // error at the refitted scale
    if (best_err < 0 || err < best_err) best_err = err, best_dl = refit;
  }
  return best_dl;
}

// Step 1: the targets t (|x|, or x for IQ1) and each chunk's sign byte.
void targets(const Spec& sp, const float* x, float* t, Chunk* chunks) {
  for (int c = 0; c < 32; ++c) {
    const float* xc = x + 8 * c;
    float* tc = t + 8 * c;
    uint8_t signs = 0;
    for (int j = 0; j < 8; ++j) {
      if (sp.signs == Signs::kNone) {
        tc[j] = xc[j];
        continue;
      }
      tc[j] = std::fabs(xc[j]);
      if (xc[j] < 0) signs = uint8_t(signs | (1 << j));
    }
    if (sp.signs == Signs::kParity && std::popcount(unsigned(signs)) % 2 == 1) {
      int k = 0;
      for (int j = 1; j < 8; ++j)
        if (tc[j] < tc[k]) k = j;
      signs = uint8_t(signs ^ (1 << k));
      tc[k] = -tc[k];
    }
    chunks[c].signs = signs;
  }
}

// The weight of each element's squared error: the block's mean square plus
// its own square, so large weights (which a model's outputs lean on) are kept
// closer than small ones at the same bits.
void weights(const float* x, float* wt) {
  float sum = 0;
  for (int j = 0; j < 256; ++j) sum += x[j] * x[j];
  const float sigma2 = sum / 256.0f;
  for (int j = 0; j < 256; ++j) wt[j] = sigma2 + x[j] * x[j];
}

// Steps 2-4 for one block: returns D (as stored: fp16 bits) and fills the
// sub-block scales s[256 / span] and the chunks' codes.
uint16_t code_block(const Spec& sp, const float* x, int* s, Chunk* chunks) {
  float t[256], wt[256], dl[32];
  targets(sp, x, t, chunks);
  weights(x, wt);
  Chunk scratch[4];
  const int n_sub = 256 / sp.span;
  float dmax = 0;
  for (int i = 0; i < n_sub; ++i) {
    dl[i] = fit_scale(sp, t + i * sp.span, wt + i * sp.span, sp.span, scratch);
    dmax = std::max(dmax, dl[i]);
  }
  const float m_max = float(2 * sp.smax + 1);
  const uint16_t d16 = f32_to_fp16(std::min(dmax / (sp.unit * m_max), 65504.0f));
  const float du = fp16_to_f32(d16) * sp.unit;  // the scale of w at s = 0
  for (int i = 0; i < n_sub; ++i) {
    Chunk* c = chunks + i * sp.span / 8;
    const float* ti = t + i * sp.span;
    const float* wi = wt + i * sp.span;
    const int s0 =
        du > 0 ? std::clamp(int(std::lround((dl[i] / du - 1.0f) * 0.5f)), 0, sp.smax) : 0;
    int best_s = s0;
    float best_err = -1;
    for (int si = std::max(0, s0 - 1); si <= std::min(sp.smax, s0 + 1); ++si) {
      Chunk trial[4];
      for (int k = 0; k < sp.span / 8; ++k) trial[k].signs = c[k].signs;
      const float err = code_sub(sp, ti, wi, sp.span, du * float(2 * si + 1), trial).err;
      if (best_err < 0 || err < best_err) best_err = err, best_s = si;
    }
    s[i] = best_s;
    code_sub(sp, ti, wi, sp.span, du * float(2 * best_s + 1), c);
  }
  return d16;
}

void put_u16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v), p[1] = uint8_t(v >> 8);
}
void put_u32(uint8_t* p, uint32_t v) {
  for (int k = 0; k < 4; ++k) p[k] = uint8_t(v >> (8 * k));
}

// The layouts, each the inverse of its decoder in iq_codes.cpp.
void encode(DType t, uint16_t d16, const int* s, const Chunk* c, uint8_t* b) {
  switch (t) {
    case DType::IQ2_XXS:  // d | per group: 4 grid bytes, u32 (signs7 x4, scale << 28)
      put_u16(b, d16);
      for (int ib = 0; ib < 8; ++ib) {
        uint32_t aux = uint32_t(s[ib]) << 28;
        for (int l = 0; l < 4; ++l) {
          b[2 + 8 * ib + l] = uint8_t(c[4 * ib + l].idx[0]);
          aux |= uint32_t(c[4 * ib + l].signs & 127) << (7 * l);
        }
        put_u32(b + 2 + 8 * ib + 4, aux);
      }
      break;
    case DType::IQ2_XS:  // d | u16 (grid9 | signs7 << 9) x32 | scales x8
      put_u16(b, d16);
      for (int k = 0; k < 32; ++k)
        put_u16(b + 2 + 2 * k, uint16_t(c[k].idx[0] | ((c[k].signs & 127) << 9)));
      for (int ib = 0; ib < 8; ++ib) b[66 + ib] = uint8_t(s[2 * ib] | (s[2 * ib + 1] << 4));
      break;
    case DType::IQ2_S:  // d | qs x32 | signs x32 | qh x8 | scales x8
      put_u16(b, d16);
      std::memset(b + 66, 0, 8);
      for (int k = 0; k < 32; ++k) {
        b[2 + k] = uint8_t(c[k].idx[0]);
        b[34 + k] = c[k].signs;
        b[66 + k / 4] = uint8_t(b[66 + k / 4] | ((c[k].idx[0] >> 8) << (2 * (k % 4))));
      }
      for (int ib = 0; ib < 8; ++ib) b[74 + ib] = uint8_t(s[2 * ib] | (s[2 * ib + 1] << 4));
      break;
    case DType::IQ3_XXS:  // d | qs x64 | u32 (signs7 x4, scale << 28) x8
      put_u16(b, d16);
      for (int ib = 0; ib < 8; ++ib) {
        uint32_t aux = uint32_t(s[ib]) << 28;
        for (int l = 0; l < 4; ++l) {
          const Chunk& ch = c[4 * ib + l];
          b[2 + 8 * ib + 2 * l] = uint8_t(ch.idx[0]);
          b[2 + 8 * ib + 2 * l + 1] = uint8_t(ch.idx[1]);
          aux |= uint32_t(ch.signs & 127) << (7 * l);
        }
        put_u32(b + 66 + 4 * ib, aux);
      }
      break;
    case DType::IQ3_S:  // d | qs x64 | qh x8 | signs x32 | scales x4
      put_u16(b, d16);
      std::memset(b + 66, 0, 8);
      for (int k = 0; k < 32; ++k) {
        const int ib = k / 4, l = k % 4;
        b[2 + 2 * k] = uint8_t(c[k].idx[0]);
        b[2 + 2 * k + 1] = uint8_t(c[k].idx[1]);
        b[66 + ib] = uint8_t(b[66 + ib] | ((c[k].idx[0] >> 8) << (2 * l)) |
                             ((c[k].idx[1] >> 8) << (2 * l + 1)));
        b[74 + k] = c[k].signs;
      }
      for (int i = 0; i < 4; ++i) b[106 + i] = uint8_t(s[2 * i] | (s[2 * i + 1] << 4));
      break;
    case DType::IQ1_S:  // d | qs x32 | u16 (idx high 3 bits x4, scale << 12, delta << 15) x8
      put_u16(b, d16);
      for (int ib = 0; ib < 8; ++ib) {
        uint32_t qh = uint32_t(s[ib]) << 12 | (c[4 * ib].neg_delta ? 0x8000u : 0u);
        for (int l = 0; l < 4; ++l) {
          b[2 + 4 * ib + l] = uint8_t(c[4 * ib + l].idx[0]);
          qh |= uint32_t(c[4 * ib + l].idx[0] >> 8) << (3 * l);
        }
        put_u16(b + 34 + 2 * ib, uint16_t(qh));
      }
      break;
    default: {  // IQ1_M: qs x32 | qh x16 (nibble: idx high 3 bits, delta) | u16 scales x4
      uint16_t sc[4] = {0, 0, 0, 0};
      for (int k = 0; k < 32; ++k) {
        b[k] = uint8_t(c[k].idx[0]);
        const int nib = (c[k].idx[0] >> 8) | (c[k].neg_delta ? 8 : 0);
        if (k % 2 == 0)
          b[32 + k / 2] = uint8_t(nib);
        else
          b[32 + k / 2] = uint8_t(b[32 + k / 2] | (nib << 4));
      }
      for (int i = 0; i < 16; ++i) {  // sub-block i = half (i % 2) of group i / 2
        const int ib = i / 2, h = i % 2;
        sc[ib / 2] = uint16_t(sc[ib / 2] | (s[i] << (6 * (ib % 2) + 3 * h)));
      }
      for (int k = 0; k < 4; ++k) sc[k] = uint16_t(sc[k] | (((d16 >> (4 * k)) & 15) << 12));
      for (int k = 0; k < 4; ++k) put_u16(b + 48 + 2 * k, sc[k]);
    }
  }
}

}  // namespace

bool is_lattice_type(DType t) {
  switch (t) {
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ1_S:
    case DType::IQ1_M:
      return true;
    default:
      return false;
  }
}

void quantize_lattice(DType t, const float* x, uint8_t* dst, int64_t nb) {
  const Spec sp = spec_for(t);
  const size_t block_bytes = dtype_traits(t).block_bytes;
  for (int64_t i = 0; i < nb; ++i, x += 256, dst += block_bytes) {
    int s[16];
    Chunk chunks[32];
    const uint16_t d16 = code_block(sp, x, s, chunks);
    encode(t, d16, s, chunks, dst);
  }
}

}  // namespace tern::kernels
