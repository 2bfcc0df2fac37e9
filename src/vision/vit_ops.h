#pragma once
// The fast transformer-block pieces the vision encoder (ViT) and the audio
// encoder (Whisper) share: linear layers repacked to int8 tiles (W8A8 GEMMs
// on the task pool), fp32 layer norms, and one attention head with its two
// products on the same int8 kernels. Every function is row-local (a row's
// result does not depend on which other rows are in the call), which is
// what lets the resumable jobs run them on row blocks and stay bit-identical
// to a whole-tile or whole-chunk encode.
#include <vector>

#include "tern/kernels/ops.h"
#include "tern/kernels/packed.h"
#include "tern/vision/mmproj.h"

namespace tern {
class TaskPool;
}

namespace tern::vision::detail {

using Floats = std::vector<float>;

// Rows of n_in floats, zero-padded to a multiple of the quantization group,
// repacked to int8: (n_out, n_in padded).
kernels::PackedMatrix pack_rows(const float* x, int n_out, int n_in);

struct Linear {
  kernels::PackedMatrix w;  // (n_out, n_in padded to the group)
  Floats b;                 // (n_out)
  int n_in = 0;             // the input rows' real width (rows of other widths are zero-padded
                            // before quantization)
};

// A GGUF matrix [n_in, n_out] (or a conv kernel whose last dim is n_out) as
// a Linear; b may be null (zeros).
Linear make_linear(Tensor w, Tensor b);
// x (T, l.n_in) -> y (T, n_out) = x W^T + b
void linear(const Linear& l, const float* x, int T, float* y, TaskPool& pool);

struct Norm {
  Floats w, b;  // (D)
};
Norm make_norm(Tensor w, Tensor b);
// y (T, D) = LN(x (T, D)) * w + b (y may be x)
void layer_norm(const Norm& n, float eps, const float* x, float* y, int T, TaskPool& pool);

// One pre-LN block's weights (ViT and Whisper share the layout; a missing
// bias is zeros).
struct Block {
  Norm ln1, ln2;
  Linear q, k, v, o, up, down;
};
Block make_block(const VisionLayerWeights& L);

// q, k, v (T, D) from xn (T, D): one quantization of xn, one dispatch.
void qkv(const Block& L, const float* xn, int T, float* q, float* k, float* v, TaskPool& pool);

// One head's share of non-causal attention; scratch reused between heads.
struct AttnScratch {
  Floats qh, kh, vt, dense, scores, oh;
  kernels::QuantizedActs qa;
};
// q, k, v, out (T, D), H heads of hd = D / H: writes out's columns
// [h hd, (h + 1) hd) = softmax(q_h k_h^T / sqrt(hd)) v_h.
void attention_head(const float* q, const float* k, const float* v, float* out, int T, int D,
                    int hd, int h, AttnScratch& s, TaskPool& pool);

// The row-wise second half of a block over n rows starting at row r0 of
// x (T, D): x += o(a); x += down(act(up(LN2(x)))). tmp (n, D) and f (n, F)
// are scratch; act runs in place on f (n, F).
template <class Act>
void block_out_rows(const Block& L, float eps, const float* a, float* x, float* xn, float* tmp,
                    float* f, int n, int D, Act&& act, TaskPool& pool) {
  linear(L.o, a, n, tmp, pool);
  for (size_t i = 0; i < size_t(n) * D; ++i) x[i] += tmp[i];
  layer_norm(L.ln2, eps, x, xn, n, pool);
  linear(L.up, xn, n, f, pool);
  act(f, n);
  linear(L.down, f, n, tmp, pool);
  for (size_t i = 0; i < size_t(n) * D; ++i) x[i] += tmp[i];
}

}  // namespace tern::vision::detail
