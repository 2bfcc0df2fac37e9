// Repacking GGUF weights into the engine's tiled int4/int8 layout (packed.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/kernels/dequant.h"
#include "tern/kernels/packed.h"

namespace tern::kernels {

namespace {

// GGUF block layouts used for the exact conversions.
struct Q4_1Src {
  uint16_t d, m;
  uint8_t qs[16];
};
struct Q4_0Src {
  uint16_t d;
  uint8_t qs[16];
};
struct Q8_0Src {
  uint16_t d;
  int8_t qs[32];
};
static_assert(sizeof(Q4_1Src) == 20 && sizeof(Q4_0Src) == 18 && sizeof(Q8_0Src) == 34);

// Quantize one group of 32 floats to int4 asymmetric (round to nearest).
void quant_group_int4(const float* x, float& d, float& m, uint8_t* q) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < kGroup; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  d = (hi - lo) / 15.0f;
  m = lo;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kGroup / 2; ++j) {
    const int a = std::clamp(int(std::lround((x[j] - lo) * id)), 0, 15);
    const int b = std::clamp(int(std::lround((x[j + 16] - lo) * id)), 0, 15);
    q[j] = uint8_t(a | (b << 4));
  }
}

void quant_group_int8(const float* x, float& d, int8_t* q) {
  float amax = 0.0f;
  for (int j = 0; j < kGroup; ++j) amax = std::max(amax, std::fabs(x[j]));
  d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kGroup; ++j) q[j] = int8_t(std::clamp(std::lround(x[j] * id), -127L, 127L));
}

}  // namespace

WeightFormat default_format_for(DType src) {
  switch (src) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q4_K:
      return WeightFormat::Int4Asym;
    default:
      return WeightFormat::Int8Sym;
  }
}

PackedMatrix pack_matrix(DType src_type, const void* src, int n_out, int n_in, WeightFormat fmt) {
  if (n_in % kGroup != 0) {
    throw FormatError("cannot repack a weight with rows of " + std::to_string(n_in) +
                      " elements: not a multiple of " + std::to_string(kGroup));
  }
  PackedMatrix w;
  w.format = fmt;
  w.n_out = n_out;
  w.n_in = n_in;
  const int groups = n_in / kGroup;
  w.data = AlignedBuffer<uint8_t>(size_t(w.n_tiles()) * groups * w.block_bytes());
  const size_t src_row_bytes = dtype_row_bytes(src_type, size_t(n_in));
  const auto* src_bytes = static_cast<const uint8_t*>(src);
  std::vector<float> row(static_cast<size_t>(n_in));

  for (int r = 0; r < n_out; ++r) {
    const int t = r / kTileRows, i = r % kTileRows;
    const uint8_t* srow = src_bytes + size_t(r) * src_row_bytes;
    uint8_t* tile = w.data.data() + size_t(t) * groups * w.block_bytes();
    const bool exact4 = fmt == WeightFormat::Int4Asym &&
                        (src_type == DType::Q4_1 || src_type == DType::Q4_0);
    const bool exact8 = fmt == WeightFormat::Int8Sym && src_type == DType::Q8_0;
    if (!exact4 && !exact8) dequantize_row(src_type, srow, row.data(), n_in);
    for (int g = 0; g < groups; ++g) {
      if (fmt == WeightFormat::Int4Asym) {
        auto* b = reinterpret_cast<Int4Block*>(tile) + g;
        if (src_type == DType::Q4_1) {
          Q4_1Src s;
          std::memcpy(&s, srow + size_t(g) * sizeof(Q4_1Src), sizeof s);
          b->d[i] = fp16_to_f32(s.d);
          b->m[i] = fp16_to_f32(s.m);
          std::memcpy(b->q[i], s.qs, 16);
        } else if (src_type == DType::Q4_0) {
          // d*(q-8) == d*q + (-8d): exact in f32.
          Q4_0Src s;
          std::memcpy(&s, srow + size_t(g) * sizeof(Q4_0Src), sizeof s);
          b->d[i] = fp16_to_f32(s.d);
          b->m[i] = -8.0f * b->d[i];
          std::memcpy(b->q[i], s.qs, 16);
        } else {
          quant_group_int4(row.data() + g * kGroup, b->d[i], b->m[i], b->q[i]);
        }
      } else {
        auto* b = reinterpret_cast<Int8Block*>(tile) + g;
        if (exact8) {
          Q8_0Src s;
          std::memcpy(&s, srow + size_t(g) * sizeof(Q8_0Src), sizeof s);
          b->d[i] = fp16_to_f32(s.d);
          std::memcpy(b->q[i], s.qs, 32);
        } else {
          quant_group_int8(row.data() + g * kGroup, b->d[i], b->q[i]);
        }
      }
    }
  }
  return w;
}

void unpack_row(const PackedMatrix& w, int r, float* dst) {
  const int t = r / kTileRows, i = r % kTileRows;
  const uint8_t* tile = w.tile(t);
  for (int g = 0; g < w.n_groups(); ++g) {
    float* out = dst + g * kGroup;
    if (w.format == WeightFormat::Int4Asym) {
      const auto* b = reinterpret_cast<const Int4Block*>(tile) + g;
      for (int j = 0; j < 16; ++j) {
        out[j] = b->d[i] * float(b->q[i][j] & 0xf) + b->m[i];
        out[j + 16] = b->d[i] * float(b->q[i][j] >> 4) + b->m[i];
      }
    } else {
      const auto* b = reinterpret_cast<const Int8Block*>(tile) + g;
      for (int j = 0; j < kGroup; ++j) out[j] = b->d[i] * float(b->q[i][j]);
    }
  }
}

void QuantizedActs::resize(int new_rows, int new_n) {
  rows = new_rows;
  n_in = new_n;
  const size_t nq = size_t(new_rows) * size_t(new_n);
  const size_t ng = nq / kGroup;
  if (q.size() < nq) q = AlignedBuffer<int8_t>(nq);
  if (d.size() < ng) d = AlignedBuffer<float>(ng);
  if (s.size() < ng) s = AlignedBuffer<float>(ng);
}

}  // namespace tern::kernels
