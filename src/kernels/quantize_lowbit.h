#pragma once
// Quantizers of the types whose encoding needs a search (private to
// kernels/; quantize_row_ref is the entry point):
//   quantize_iq.cpp  the lattice types IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS,
//                    IQ2_S, IQ1_S, IQ1_M
//   quantize_k.cpp   the K-quants Q4_K, Q5_K, Q6_K
// Both are deterministic scalar code with no importance matrix: a few scale
// candidates per sub-block, each refitted by least squares, the best kept.
#include <cstdint>

#include "tern/core/dtype.h"

namespace tern::kernels {

bool is_lattice_type(DType t);
// x: float[256 * nb] -> dst: nb blocks of t (is_lattice_type(t)).
void quantize_lattice(DType t, const float* x, uint8_t* dst, int64_t nb);

bool is_k_search_type(DType t);
// x: float[256 * nb] -> dst: nb blocks of t (Q4_K, Q5_K or Q6_K).
void quantize_k_search(DType t, const float* x, uint8_t* dst, int64_t nb);

}  // namespace tern::kernels
