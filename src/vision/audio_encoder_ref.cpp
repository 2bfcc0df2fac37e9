// The scalar fp32 twin of the audio encoder (audio_encoder.h): every weight
// dequantized to fp32, plain loops with fp64 sums. Slow on purpose; it is
// the oracle the int8 path is tested against, and it is itself held to
// llama.cpp's embeddings.
#include <cmath>

#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/vision/audio_encoder.h"
#include "vit_common.h"
#include "vit_ref.h"

namespace tern::vision {
namespace {

using detail::to_floats;
using detail::ref::layer_norm;
using detail::ref::linear;
using detail::ref::Rows;

float round_fp16(float x) {
  return fp16_to_f32(f32_to_fp16(x));
}

float gelu(float x) {
  return detail::gelu_erf(x);
}

// out (L_out, C_out) = GELU(conv1d(in) + b), kernel 3, padding 1, stride s;
// in(c, t) reads input channel c at time t (in range). Operands rounded to
// fp16 as ggml's im2col conv does.
template <class In>
Rows conv_gelu(In in, int C_in, int L_in, int stride, Tensor kernel, Tensor bias) {
  const int C_out = int(kernel->dims[2]), L_out = (L_in - 1) / stride + 1;
  Rows K = to_floats(kernel);  // (C_out, C_in, 3)
  for (float& v : K) v = round_fp16(v);
  const Rows B = to_floats(bias);
  Rows out(size_t(L_out) * C_out);
  for (int t = 0; t < L_out; ++t)
    for (int o = 0; o < C_out; ++o) {
      double s = 0;
      for (int c = 0; c < C_in; ++c)
        for (int k = 0; k < 3; ++k) {
          const int ti = t * stride + k - 1;
          if (ti >= 0 && ti < L_in)
            s += double(K[(size_t(o) * C_in + c) * 3 + k]) * round_fp16(in(c, ti));
        }
      out[size_t(t) * C_out + o] = gelu(float(s + B[size_t(o)]));
    }
  return out;
}

// Rows of D, s at a time, concatenated into rows of D s (zero-padded at the end).
Rows stack_rows(const Rows& x, int T, int D, int s, int* n_out) {
  *n_out = (T + s - 1) / s;
  Rows y(size_t(*n_out) * D * s, 0.0f);
  std::copy(x.begin(), x.begin() + ptrdiff_t(T) * D, y.begin());
  return y;
}

void rms_rows(Rows& x, int T, int n, Tensor w) {
  const Rows W = to_floats(w);
  for (int t = 0; t < T; ++t) detail::rms_norm(&x[size_t(t) * n], W.data(), n, 1e-6f);
}

}  // namespace

Embeddings reference_encode_chunk(const AudioMmproj& mm, const MelChunk& mel) {
  const AudioConfig& c = mm.config();
  const AudioWeights& w = mm.weights();
  const int D = c.d_model, F = AudioConfig::kFrames, P = c.n_positions();
  if (mel.n_mel != c.n_mel || mel.n_frames != F || mel.data.size() != size_t(c.n_mel) * size_t(F))
    throw InvalidArgument("mel chunk is not (" + std::to_string(c.n_mel) + ", " +
                          std::to_string(F) + ")");

  // Two convolutions with GELU: (F, D), then (P, D) at stride 2; + positions.
  const Rows h1 = conv_gelu([&](int ch, int t) { return mel.data[size_t(ch) * F + t]; }, c.n_mel, F,
                            1, w.conv1_w, w.conv1_b);
  Rows x = conv_gelu([&](int ch, int t) { return h1[size_t(t) * D + ch]; }, D, F, 2, w.conv2_w,
                     w.conv2_b);
  const Rows pos = to_floats(w.pos_embd);  // (n_pos_table, D): the first P rows
  for (size_t i = 0; i < size_t(P) * D; ++i) x[i] += pos[i];

  for (const VisionLayerWeights& L : w.layers)
    detail::ref::block(x, P, D, c.n_heads, c.ln_eps, L, gelu);

  int T = P;
  if (c.projector != AudioProjector::Ultravox) {  // average pool 2, stride 2
    T = P / 2;
    for (int t = 0; t < T; ++t)
      for (int d = 0; d < D; ++d)
        x[size_t(t) * D + d] =
            float((double(x[size_t(2 * t) * D + d]) + x[size_t(2 * t + 1) * D + d]) / 2);
    x.resize(size_t(T) * D);
  }
  if (c.has_post_ln) x = layer_norm(x, T, D, w.post_ln_w, w.post_ln_b, c.ln_eps);

  if (c.projector == AudioProjector::Qwen2a)
    return Embeddings{T, c.d_out, linear(x, T, w.fc_w, w.fc_b)};
  int n = 0;
  Rows st = stack_rows(x, T, D, c.stack_factor, &n);  // (n, D s)
  if (c.projector == AudioProjector::Voxtral) {
    Rows h = linear(st, n, w.mlp1_w, nullptr);
    for (float& v : h) v = gelu(v);
    return Embeddings{n, c.d_out, linear(h, n, w.mlp2_w, nullptr)};
  }
  // ultravox: RMSNorm, SwiGLU with the second half gated, RMSNorm, out.
  const int H = c.d_proj_hidden;
  rms_rows(st, n, D * c.stack_factor, w.norm_pre_w);
  const Rows h2 = linear(st, n, w.mlp1_w, nullptr);  // (n, 2H)
  Rows h(size_t(n) * H);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < H; ++i) {
      const double g = h2[size_t(t) * 2 * H + H + i];
      h[size_t(t) * H + i] = float(g / (1 + std::exp(-g)) * h2[size_t(t) * 2 * H + i]);
    }
  rms_rows(h, n, H, w.norm_mid_w);
  return Embeddings{n, c.d_out, linear(h, n, w.mlp2_w, nullptr)};
}

}  // namespace tern::vision
