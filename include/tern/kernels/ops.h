#pragma once
// The kernels the forward pass calls. Each takes raw pointers with shapes in
// the comments and never sees a model config. dispatch.cpp picks the fastest
// implementation available on this CPU at start-up (TERN_KERNELS=scalar
// forces the reference path); kernels_ref.cpp is the oracle for all of them.
#include <cstdint>

#include "tern/kernels/packed.h"

namespace tern {
class TaskPool;
}

namespace tern::kernels {

// x (rows, n) -> qa: int8 per group of 32, with scales.
void quantize_activations(const float* x, int rows, int n, QuantizedActs& qa);

// Y (rows, n_out) = X (rows, n_in) @ W^T, with X already quantized.
// Splits work over output tiles (and rows) on the pool.
void matmul(const PackedMatrix& w, const QuantizedActs& x, float* y, TaskPool& pool);

// out (n) = x (n) / rms(x) * weight (n); sum of squares accumulated in double.
void rmsnorm(const float* x, const float* weight, float* out, int n, float eps);

// In place on one token: x holds n_heads heads of head_dim; rotates the first
// rope_dims of each head by angle pos * theta_scale^i (freq_factors may be null).
// neox: pairs (i, i + rope_dims/2); otherwise adjacent pairs (2i, 2i+1).
struct RopeParams {
  int head_dim = 0;
  int rope_dims = 0;
  float theta_base = 10000.0f;
  bool neox = false;
  const float* freq_factors = nullptr;  // (rope_dims/2) divisors, Llama-3 scaling
};
void rope(float* x, int n_heads, int pos, const RopeParams& p);

// out (n) = silu(gate (n)) * up (n)
void swiglu(const float* gate, const float* up, float* out, int n);

// In place softmax over n values (fp32, max-subtracted).
void softmax(float* x, int n);

// Single-query attention for one head against n_kv cached positions, with an
// online softmax (no full score matrix). q (head_dim) is pre-scaled by
// 1/sqrt(head_dim). K and V rows are fp16 at k + t*stride, v + t*stride.
// out (head_dim) = sum_t softmax(q.k_t) v_t.
void attention_f16(const float* q, const uint16_t* k, const uint16_t* v, int n_kv, int head_dim,
                   int64_t stride, float* out);

// Name of the active implementation ("avx2", "scalar").
const char* kernel_isa();

}  // namespace tern::kernels
