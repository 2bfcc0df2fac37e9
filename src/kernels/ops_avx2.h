#pragma once
// The AVX2 element-wise and attention kernels (ops_avx2.cpp), shared by every
// x86 table (the AVX-VNNI table differs only in its dot products).
#include <cstdint>

#include "tern/kernels/packed.h"

namespace tern::kernels::avx2 {

void quantize_rows(const float* x, int r0, int r1, int n, QuantizedActs& qa);
void rmsnorm(const float* x, const float* weight, float* out, int n, float eps);
void swiglu(const float* gate, const float* up, float* out, int n);
void softmax(float* x, int n);
void attention_f16(const float* q, float* out, int64_t q_stride, int n_tok, int n_grp, int n_kv0,
                   const uint16_t* k, const uint16_t* v, int64_t kv_stride, int head_dim);
void f32_to_f16(const float* x, uint16_t* out, int n);

}  // namespace tern::kernels::avx2
