#pragma once
// The codebooks of the i-quant and MXFP4 formats (defined in iq_grids.cpp,
// generated from llama.cpp's ggml-common.h by scripts/gen_iq_grids.py).
//
// Grid entries pack 8 (uint64_t) or 4 (uint32_t) byte-sized values, element j
// in byte j (little-endian): the IQ2 / IQ3 grids hold unsigned magnitudes
// (signs are stored separately), the IQ1 grid signed values -1, 0, 1.
#include <cstdint>

namespace tern::kernels::iq {

// Sign patterns of 8 values: bit j set = element j negative. Indexed by the
// stored 7 bits; the 8th sign is chosen so the count of negatives is even.
extern const uint8_t kSignsIq2xs[128];
extern const uint64_t kIq2xxsGrid[256];  // values 8, 25, 43
extern const uint64_t kIq2xsGrid[512];   // values 8, 25, 43
extern const uint64_t kIq2sGrid[1024];   // values 8, 25, 43
extern const uint32_t kIq3xxsGrid[256];  // values 4, 12, ..., 62
extern const uint32_t kIq3sGrid[512];    // values 1, 3, ..., 15
extern const uint64_t kIq1sGrid[2048];   // values -1, 0, 1 (int8)
extern const int8_t kValuesFp4[16];      // e2m1 values, doubled: 0, 1, 2, 3, 4, 6, 8, 12, -0, ...

// Byte j (0..7) of a grid entry.
inline int grid_byte(uint64_t entry, int j) {
  return int((entry >> (8 * j)) & 0xFF);
}

}  // namespace tern::kernels::iq
