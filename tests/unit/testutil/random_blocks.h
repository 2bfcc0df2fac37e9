#pragma once
// Random blocks of the lattice types, which kernels::quantize_ref cannot
// write (IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M), and of the
// ternary TQ1_0 / TQ2_0, MXFP4, NVFP4, Q1_0 and Q2_0 (codes its test
// quantizers would not write, e.g. NVFP4 halves of unlike scales): random code bytes with each
// block's scale set so its values have a chosen RMS. Enough to write test models and pack inputs of
// these types without llama.cpp's quantizers.
#include <cstdint>
#include <random>
#include <vector>

#include "tern/core/dtype.h"

namespace tern::test {

// True for the types random_blocks can write.
bool can_write_random_blocks(DType t);

// n elements of type t (n a multiple of its block size): random codes, each
// block scaled to an RMS of about `rms` (MXFP4, NVFP4: within a factor sqrt 2).
std::vector<uint8_t> random_blocks(DType t, size_t n, float rms, std::mt19937& rng);

}  // namespace tern::test
