#pragma once
// The NEON element-wise and attention kernels (ops_neon.cpp, Armv8.0), shared
// by every aarch64 table (they differ only in their matrix products).
#include <cstdint>

#include "dispatch.h"
#include "tern/kernels/packed.h"

namespace tern::kernels::neon {

// An aarch64 table: these kernels with the ISA's own matrix product.
using GemmTilesFn = decltype(KernelTable::gemm_tiles);
KernelTable table(const char* isa, GemmTilesFn gemm_tiles);

void quantize_rows(const float* x, int r0, int r1, int n, QuantizedActs& qa);
void rmsnorm(const float* x, const float* weight, float* out, int n, float eps);
void swiglu(const float* gate, const float* up, float* out, int n);
void geglu(const float* gate, const float* up, float* out, int n);
void attention_f16(const float* q, float* out, int64_t q_stride, int n_tok, int n_grp, int n_kv0,
                   const uint16_t* k, const uint16_t* v, int64_t kv_stride, int head_dim);

}  // namespace tern::kernels::neon
