#pragma once
// The kernels the forward pass calls. Each takes raw pointers with shapes in
// the comments and never sees a model config. dispatch.cpp picks the fastest
// implementation available on this CPU at start-up (TERN_KERNELS=scalar
// forces the reference path); kernels_ref.cpp is the oracle for all of them.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

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

// The encoder (BERT-family) element-wise ops. Portable only: O(n) per token
// beside the O(n^2) matrix products, they never show in a profile.
// out (n) = (x - mean) / sqrt(var + eps) * weight + bias, mean and variance
// accumulated in double (ggml_norm, then the affine part). out may be x.
void layernorm(const float* x, const float* weight, const float* bias, float* out, int n,
               float eps);
// x (n) = gelu_tanh(x) in place: the ungated FFN activation of BERT (ggml_gelu).
void gelu(float* x, int n);

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

// The instruction sets tern has kernel tables for. kernels owns the only ISA
// decision (CPU features, the build, and TERN_KERNELS); per-ISA code that
// lives outside kernels/ because it reads another module's formats (kv's block
// attention) follows active_isa() and never reads CPU features itself.
enum class Isa : uint8_t {
  Scalar,       // portable C++, the oracle every other table is tested against
  Avx2,         // x86-64: AVX2 + FMA + F16C
  AvxVnni,      // x86-64: the AVX2 table with AVX-VNNI dot products
  Avx512Vnni,   // x86-64: AVX-512 F/BW/VL/VNNI matrix products
  Neon,         // aarch64: Armv8.0 Advanced SIMD (widening multiplies)
  NeonDotprod,  // aarch64: + SDOT (Armv8.2 dotprod: Cortex-A76, Neoverse N1, Apple M1)
  NeonI8mm,     // aarch64: + SMMLA (Armv8.6 i8mm: Neoverse V1/N2, Apple M2 on)
};
inline constexpr int kNumIsas = 7;

// "scalar", "avx2", "avxvnni", "avx512vnni", "neon", "neon-dotprod", "neon-i8mm"
// (the names TERN_KERNELS takes).
const char* isa_name(Isa isa);
// The table in use, chosen once: the best this CPU and build can run, or the
// one TERN_KERNELS names (scalar, with a warning, when it cannot run here).
Isa active_isa();
// Every ISA this build and CPU can run, scalar first, best last.
std::vector<Isa> available_isas();
// Whether this build has a table for the ISA and this CPU can run it.
bool isa_available(Isa isa);
// One line saying what was chosen and why, for `tern info` and the logs,
// e.g. "neon-dotprod (best of: scalar, neon, neon-dotprod; CPU: asimd dotprod fp16)".
std::string isa_choice();
// isa_name(active_isa()).
const char* kernel_isa();

}  // namespace tern::kernels
