#pragma once
// The kernels the forward pass calls. Each takes raw pointers with shapes in
// the comments and never sees a model config. dispatch.cpp picks the fastest
// implementation available on this CPU at start-up (TERN_KERNELS=scalar
// forces the reference path); kernels_ref.cpp is the oracle for all of them.
#include <cstdint>
#include <initializer_list>

#include "tern/kernels/packed.h"

namespace tern {
class TaskPool;
}

namespace tern::kernels {

// x (rows, n) -> qa: int8 per group of 32, with scales. Rows are split over
// the pool when there are many of them.
void quantize_activations(const float* x, int rows, int n, QuantizedActs& qa, TaskPool& pool);

// Y (rows, n_out) = X (rows, n_in) @ W^T, with X already quantized.
// Splits work over output tiles (and rows) on the pool.
void matmul(const PackedMatrix& w, const QuantizedActs& x, float* y, TaskPool& pool);

// Several weights applied to the same input in one dispatch (q/k/v, gate/up):
// y_i (rows, w_i.n_out) = X @ W_i^T for every output. Saves a join per weight
// and lets small matrices (k, v) share the pool's tail with big ones.
struct MatmulOut {
  const PackedMatrix* w;
  float* y;
};
void matmul(std::initializer_list<MatmulOut> outs, const QuantizedActs& x, TaskPool& pool);

// out (n) = x (n) / rms(x) * weight (n); sum of squares accumulated in double.
void rmsnorm(const float* x, const float* weight, float* out, int n, float eps);

// In place on one token: q holds n_q heads and k n_k heads of head_dim; rotates
// the first rope_dims of each head by angle pos * theta_scale^i (freq_factors
// may be null), the angles computed once for all heads. neox: pairs
// (i, i + rope_dims/2); otherwise adjacent pairs (2i, 2i+1). k may be null.
struct RopeParams {
  int head_dim = 0;
  int rope_dims = 0;
  float theta_base = 10000.0f;
  bool neox = false;
  const float* freq_factors = nullptr;  // (rope_dims/2) divisors, Llama-3 scaling
};
void rope(float* q, int n_q, float* k, int n_k, int pos, const RopeParams& p);

// out (n) = silu(gate (n)) * up (n)
void swiglu(const float* gate, const float* up, float* out, int n);

// out (n) = gelu_tanh(gate (n)) * up (n), the gated FFN of Gemma, where
// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void geglu(const float* gate, const float* up, float* out, int n);

// Causal attention of a block of query tokens of one sequence against one KV
// head, with an online softmax (fp32, no score matrix). Token i of the block
// (0 <= i < n_tok) sees cache positions [0, n_kv0 + i); its n_grp query heads
// (those sharing this KV head) are at q + i*q_stride + g*head_dim, pre-scaled
// by 1/sqrt(head_dim), and their outputs go to out with the same layout. K and
// V rows are fp16 at k + t*kv_stride, v + t*kv_stride. Every K/V row is
// converted once for all the block's queries.
// out = sum_t softmax(q.k_t) v_t for each query.
void attention_f16(const float* q, float* out, int64_t q_stride, int n_tok, int n_grp, int n_kv0,
                   const uint16_t* k, const uint16_t* v, int64_t kv_stride, int head_dim);

// Name of the active implementation ("avx512vnni", "avxvnni", "avx2", "scalar").
const char* kernel_isa();

// The instruction-set family of the table the dispatch point chose (CPUID,
// or TERN_KERNELS). Per-ISA code that lives outside kernels/ because it reads
// another module's data formats (kv's block attention decodes kv's row
// codecs) follows this choice; it never reads CPUID or TERN_KERNELS itself.
// Avx2 covers the avxvnni and avx512vnni tables too (both need AVX2+FMA+F16C).
enum class IsaFamily : uint8_t { Scalar, Avx2 };
IsaFamily active_isa_family();
// Whether this CPU can run AVX2+FMA+F16C code at all, whatever was chosen
// (for tests and benchmarks that compare every variant with the scalar one).
bool cpu_runs_avx2();
// Whether the active table is the AVX-512 VNNI one (TERN_KERNELS may force
// another): attention then may use its AVX-512 kernels too.
bool active_isa_is_avx512();

}  // namespace tern::kernels
