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
  void (*geglu)(const float* gate, const float* up, float* out, int n);
  void (*attention_f16)(const float* q, float* out, int64_t q_stride, int n_tok, int n_grp,
                        int n_kv0, const uint16_t* k, const uint16_t* v, int64_t kv_stride,
                        int head_dim);
};

// How many blocks ahead the decode GEMV prefetches each weight stream (0:
// none, the hardware prefetchers alone). Intel cores stream the int4 GEMV
// 1.8x faster with it; on AMD Zen 4 it costs 5-10 % (the GEMV reads the
// Gemma 3 head at 28.5 GB/s without it, 25-26 with it), so it is off there.
// TERN_GEMV_PREFETCH=N overrides. Set once, before the first matmul.
extern int g_gemv_prefetch;

// Rows of activations one matmul task takes together (all of them up to 16;
// beyond, evened-out chunks whose int8 activations stay in L1). Shared by
// matmul() and gemm_jobs(); any split gives the same outputs.
int row_chunk_for(int rows, int n_in);

const KernelTable& scalar_kernels();
// Each returns nullptr when the binary was built without that ISA's file;
// kernel_table() adds the check that the CPU can run it.
const KernelTable* avx2_kernels();     // AVX2 + FMA + F16C (gemm_avx2.cpp)
const KernelTable* avxvnni_kernels();  // the AVX2 table with AVX-VNNI dot products
const KernelTable* avx512_kernels();   // AVX-512 F/BW/VL/VNNI matrix products, AVX2 elsewhere
const KernelTable* neon_kernels();     // Armv8.0 NEON (gemm_neon.cpp)
const KernelTable* dotprod_kernels();  // NEON + SDOT (gemm_dotprod.cpp)
const KernelTable* i8mm_kernels();     // NEON + SDOT + SMMLA (gemm_i8mm.cpp)

// The table of an ISA when this build has it and this CPU can run it, else
// nullptr (scalar is always there). Tests loop over available_isas() with it.
const KernelTable* kernel_table(Isa isa);

// The table in use: kernel_table(active_isa()).
const KernelTable& active_kernels();

}  // namespace tern::kernels
