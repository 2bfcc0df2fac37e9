#pragma once
// Pieces the fast and the reference ViT share: data movement that is exact
// (patch extraction, pixel shuffle) and reading a tensor as floats.
#include <cmath>
#include <vector>

#include "tern/vision/mmproj.h"

namespace tern::vision::detail {

// A tensor's values as fp32, (n_rows, dims[0]) row-major.
std::vector<float> to_floats(Tensor t);

// im2col for a conv with kernel = stride = P over a (S, S, 3) interleaved
// tile: out (N, row_len), N = (S/P)^2 patches row-major; each row holds the
// patch as (channel, ky, kx), kx fastest -- the order of a GGUF conv kernel
// [P, P, 3, D] -- and zeros from 3*P*P up to row_len.
void extract_patches(const float* tile, int S, int P, int row_len, float* out);

// Pixel shuffle (idefics3, llama.cpp's patch-merge permute): x (side*side, D)
// -> out (side/m * side/m, D*m*m); output token (Y, X) concatenates patches
// (X*m + dx, Y*m + dy) for dy, then dx: feature c + D*(dx + m*dy).
void pixel_shuffle(const float* x, int side, int D, int m, float* out);

// Average pooling m x m (gemma3): x (side*side, D) -> out ((side/m)^2, D),
// output token (Y, X) the mean of patches (X*m + dx, Y*m + dy).
void avg_pool(const float* x, int side, int D, int m, float* out);

// CLIP's quick GELU: x sigmoid(kQuickGeluScale x).
inline constexpr float kQuickGeluScale = 1.702f;

// The exact (erf) GELU of LLaVA's projector (torch.nn.GELU()). llama.cpp uses
// its tanh approximation there; the two differ by < 5e-4 per value.
inline float gelu_erf(float x) {
  return float(0.5 * double(x) * (1.0 + std::erf(double(x) * 0.7071067811865476)));
}

// In place: x (n) = x / rms(x) * w (n), rms with eps inside the root (fp64 sum).
void rms_norm(float* x, const float* w, int n, float eps);

}  // namespace tern::vision::detail
