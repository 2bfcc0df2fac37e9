#pragma once
// The scalar pieces the reference (oracle) encoders share: every weight
// dequantized to fp32, plain loops with fp64 sums. Slow on purpose.
#include <vector>

#include "tern/vision/mmproj.h"

namespace tern::vision::detail::ref {

using Rows = std::vector<float>;

// y (T, n_out) = x (T, n_in) @ W^T + b; W is GGUF [n_in, n_out]; b may be null.
Rows linear(const Rows& x, int T, Tensor w, Tensor b);
// LN over rows of D, times w plus b.
Rows layer_norm(const Rows& x, int T, int D, Tensor w, Tensor b, float eps);
// Non-causal multi-head attention: q, k, v (T, D) -> (T, D), H heads.
Rows attention(const Rows& q, const Rows& k, const Rows& v, int T, int D, int H);
// One pre-LN block in place on x (T, D):
//   x += o(attn(LN1(x))); x += down(act(up(LN2(x))))
void block(Rows& x, int T, int D, int H, float eps, const VisionLayerWeights& L,
           float (*act)(float));

}  // namespace tern::vision::detail::ref
