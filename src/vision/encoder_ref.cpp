// The scalar fp32 twin of the vision encoder: every weight dequantized to
// fp32, plain loops with fp64 sums. Slow on purpose; it is the oracle.
#include <cmath>

#include "tern/core/error.h"
#include "tern/vision/encoder.h"
#include "vit_common.h"
#include "vit_ref.h"

namespace tern::vision {
namespace {

using detail::to_floats;
using detail::ref::layer_norm;
using detail::ref::linear;
using detail::ref::Rows;

float activation(float x, VisionFfn f) {
  const double v = x;
  switch (f) {
    case VisionFfn::Gelu:  // tanh approximation, as SigLIP (gelu_pytorch_tanh) and ggml_gelu
      return float(0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    case VisionFfn::GeluQuick:
      return float(v / (1 + std::exp(-double(detail::kQuickGeluScale) * v)));
    case VisionFfn::Silu:
      return float(v / (1 + std::exp(-v)));
  }
  return x;
}

// The file's FFN activation, as a plain function for ref::block.
template <VisionFfn F>
float act(float x) {
  return activation(x, F);
}

}  // namespace

Embeddings reference_encode_tile(const Mmproj& mm, const PixelTile& tile) {
  const VisionConfig& c = mm.config();
  const VisionWeights& w = mm.weights();
  const int S = c.image_size, P = c.patch_size, D = c.d_model, side = c.patches_per_side();
  const int N = c.n_patches(), K = 3 * P * P;
  const int T = c.n_positions(), first = T - N;  // first: 1 with a class token (row 0)
  if (tile.size != S) throw InvalidArgument("tile size does not match the encoder");

  // [class token] + patch embedding (conv as a matrix product), + positions:
  // x (T, D), the class token first as in CLIP; then CLIP's pre-LN.
  Rows patches(size_t(N) * K);
  detail::extract_patches(tile.pixels.data(), S, P, K, patches.data());
  const Rows patch_w = to_floats(w.patch_w);  // (D, K)
  const Rows patch_b = w.patch_b ? to_floats(w.patch_b) : Rows(size_t(D), 0.0f);
  const Rows pos = to_floats(w.pos_embd);  // (T, D)
  Rows x(size_t(T) * D);
  if (first) {
    const Rows cls = to_floats(w.class_embd);
    for (int o = 0; o < D; ++o) x[size_t(o)] = float(double(cls[size_t(o)]) + pos[size_t(o)]);
  }
  for (int t = 0; t < N; ++t)
    for (int o = 0; o < D; ++o) {
      double s = patch_b[size_t(o)];
      for (int i = 0; i < K; ++i)
        s += double(patches[size_t(t) * K + i]) * patch_w[size_t(o) * K + i];
      x[size_t(first + t) * D + o] = float(s + pos[size_t(first + t) * D + o]);
    }
  if (c.has_pre_ln) x = layer_norm(x, T, D, w.pre_ln_w, w.pre_ln_b, c.ln_eps);

  float (*const act_fn)(float) = c.ffn == VisionFfn::Gelu        ? act<VisionFfn::Gelu>
                                 : c.ffn == VisionFfn::GeluQuick ? act<VisionFfn::GeluQuick>
                                                                 : act<VisionFfn::Silu>;
  for (int il = 0; il < c.n_blocks_run(); ++il)
    detail::ref::block(x, T, D, c.n_heads, c.ln_eps, w.layers[size_t(il)], act_fn);
  if (c.has_post_ln) x = layer_norm(x, T, D, w.post_ln_w, w.post_ln_b, c.ln_eps);

  if (c.projector == ProjectorType::Mlp) {  // drop the class token; mm.2(GELU(mm.0(x)))
    const Rows patch_rows(x.begin() + ptrdiff_t(first) * D, x.end());
    Rows h = linear(patch_rows, N, w.mm0_w, w.mm0_b);
    for (float& v : h) v = detail::gelu_erf(v);
    return Embeddings{N, c.d_out, linear(h, N, w.mm2_w, w.mm2_b)};
  }

  const int m = c.merge, n_out = N / (m * m);
  if (c.projector == ProjectorType::Idefics3) {
    Rows shuffled(size_t(N) * D);
    detail::pixel_shuffle(x.data(), side, D, m, shuffled.data());
    return Embeddings{n_out, c.d_out, linear(shuffled, n_out, w.fc_w, nullptr)};
  }
  // gemma3: average pool, RMS norm by the soft embedding weight, projection
  // stored [d_out, D] (y = x P with P (D, d_out)).
  Rows pooled(size_t(n_out) * D);
  detail::avg_pool(x.data(), side, D, m, pooled.data());
  const Rows norm_w = to_floats(w.soft_norm_w), proj = to_floats(w.input_proj_w);
  Embeddings out{n_out, c.d_out, Rows(size_t(n_out) * c.d_out)};
  for (int t = 0; t < n_out; ++t) {
    float* r = &pooled[size_t(t) * D];
    detail::rms_norm(r, norm_w.data(), D, c.ln_eps);
    for (int o = 0; o < c.d_out; ++o) {
      double s = 0;
      for (int d = 0; d < D; ++d) s += double(r[d]) * proj[size_t(d) * c.d_out + o];
      out.data[size_t(t) * c.d_out + o] = float(s);
    }
  }
  return out;
}

}  // namespace tern::vision
