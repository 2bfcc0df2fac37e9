#pragma once
// The AVX2 element-wise and attention kernels (ops_avx2.cpp), shared by every
// x86 table (the AVX-VNNI table differs only in its dot products).
#include <cstdint>

#include "dispatch.h"
#include "tern/kernels/packed.h"

namespace tern::kernels::avx2 {

// An x86 table: these AVX2 kernels with the ISA's own matrix product.
using GemmTilesFn = decltype(KernelTable::gemm_tiles);
KernelTable table(const char* isa, GemmTilesFn gemm_tiles);

void quantize_rows(const float* x, int r0, int r1, int n, QuantizedActs& qa);
void rmsnorm(const float* x, const float* weight, float* out, int n, float eps);
void swiglu(const float* gate, const float* up, float* out, int n);
void geglu(const float* gate, const float* up, float* out, int n);
void attention_f16(const float* q, float* out, int64_t q_stride, int n_tok, int n_grp, int n_kv0,
                   const uint16_t* k, const uint16_t* v, int64_t kv_stride, int head_dim);

}  // namespace tern::kernels::avx2
