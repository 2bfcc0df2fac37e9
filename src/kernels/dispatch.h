#pragma once
// The single dispatch point: a table of micro-kernels per instruction set.
// Only this table differs between ISAs; the splitting of work over the task
// pool (ops in dispatch.cpp) is shared.
#include <cstdint>

#include "tern/kernels/ops.h"
#include "tern/kernels/packed.h"

namespace tern::kernels {

struct KernelTable {
  const char* isa;
  // Quantize rows [r0, r1) of x (rows, n) into qa (already sized).
  void (*quantize_rows)(const float* x, int r0, int r1, int n, QuantizedActs& qa);
  // y[r][t*kTileRows + i] for rows [r0, r1) and tiles [t0, t1).
  void (*gemm_tiles)(const PackedMatrix& w, const QuantizedActs& x, float* y, int r0, int r1,
                     int t0, int t1);
  void (*rmsnorm)(const float* x, const float* weight, float* out, int n, float eps);
  void (*swiglu)(const float* gate, const float* up, float* out, int n);
  void (*softmax)(float* x, int n);
  void (*attention_f16)(const float* q, const uint16_t* k, const uint16_t* v, int n_kv,
                        int head_dim, int64_t stride, float* out);
};

const KernelTable& scalar_kernels();
// Returns nullptr when the binary was built without the AVX2 file.
const KernelTable* avx2_kernels();

// The table in use (chosen once from CPUID and TERN_KERNELS).
const KernelTable& active_kernels();

}  // namespace tern::kernels
