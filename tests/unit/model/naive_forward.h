#pragma once
// The model tests' scalar path: an independent, naive fp32 forward pass over
// dequantized weights (no int8 activations, a plain softmax), and a small
// paged f16 KV cache shaped for a model. Shared by model_test.cpp and
// lora_test.cpp.
#include <cmath>
#include <string>
#include <vector>

#include "tern/gguf/gguf.h"
#include "tern/kernels/dequant.h"
#include "tern/kv/paged_kv.h"
#include "tern/model/config.h"

namespace tern::reference {

// A paged f16 KV cache (DRAM only) shaped for the model.
class TestKv : public kv::PagedKv {
 public:
  TestKv(const ModelConfig& c, int ctx, int seqs) : kv::PagedKv(config(c, ctx, seqs)) {}
  SeqId alloc() { return create(); }
  void free(SeqId s) { release(s); }

 private:
  static kv::KvConfig config(const ModelConfig& c, int ctx, int seqs) {
    kv::KvConfig k;
    k.n_layers = c.n_layers;
    k.n_kv_heads = c.n_kv_heads;
    k.head_dim = c.head_dim;
    k.type = kv::KvType::F16;
    k.max_seqs = seqs;
    k.max_seq_tokens = ctx;
    k.dram_bytes = size_t(16) << 20;
    return k;
  }
};

inline std::vector<float> tensor_f32(const gguf::GgufFile& f, const std::string& name) {
  const auto& t = f.tensor(name);
  std::vector<float> v(size_t(t.n_elements()));
  kernels::dequantize_row(t.type, t.data, v.data(), t.n_elements());
  return v;
}

// The gated FFN's activation, in double.
inline float act(Activation a, float x) {
  if (a == Activation::GeluTanh) {
    return float(0.5 * x *
                 (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * double(x) * x * x))));
  }
  return float(x / (1.0 + std::exp(-double(x))));
}

// y (n_out) = W (n_out rows of n_in) x
inline std::vector<float> matvec(const std::vector<float>& w, const std::vector<float>& x,
                                 int n_out) {
  const size_t n_in = x.size();
  std::vector<float> y(static_cast<size_t>(n_out));
  for (int o = 0; o < n_out; ++o) {
    double s = 0;
    for (size_t i = 0; i < n_in; ++i) s += double(w[size_t(o) * n_in + i]) * x[i];
    y[size_t(o)] = float(s);
  }
  return y;
}

inline std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& w,
                                  float eps) {
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const float sc = float(1.0 / std::sqrt(ss / double(x.size()) + eps));
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * sc * w[i];
  return y;
}

inline void rope(float* v, int pos, int hd, float theta, bool neox) {
  for (int i = 0; i < hd / 2; ++i) {
    const double ang = pos * std::pow(double(theta), -2.0 * i / hd);
    const int a = neox ? i : 2 * i, b = neox ? i + hd / 2 : 2 * i + 1;
    const double x0 = v[a], x1 = v[b];
    v[a] = float(x0 * std::cos(ang) - x1 * std::sin(ang));
    v[b] = float(x0 * std::sin(ang) + x1 * std::cos(ang));
  }
}

// Naive fp32 forward over a whole token sequence; returns the last position's logits.
inline std::vector<float> naive_forward(const gguf::GgufFile& f, const ModelConfig& c,
                                        const std::vector<int32_t>& toks) {
  const int d = c.d_model, hd = c.head_dim, kvd = c.kv_dim();
  const bool neox = c.rope_style == RopeStyle::NeoX;
  const auto embd = tensor_f32(f, "token_embd.weight");
  std::vector<std::vector<float>> xs;
  for (int32_t t : toks)
    xs.emplace_back(embd.begin() + size_t(t) * d, embd.begin() + size_t(t + 1) * d);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const auto wq = tensor_f32(f, b + "attn_q.weight"), wk = tensor_f32(f, b + "attn_k.weight"),
               wv = tensor_f32(f, b + "attn_v.weight"),
               wo = tensor_f32(f, b + "attn_output.weight"),
               wg = tensor_f32(f, b + "ffn_gate.weight"), wu = tensor_f32(f, b + "ffn_up.weight"),
               wd = tensor_f32(f, b + "ffn_down.weight"),
               an = tensor_f32(f, b + "attn_norm.weight"),
               fn = tensor_f32(f, b + "ffn_norm.weight");
    std::vector<std::vector<float>> Q, K, V;
    for (size_t t = 0; t < xs.size(); ++t) {
      const auto xn = rmsnorm(xs[t], an, c.norm_eps);
      auto q = matvec(wq, xn, c.q_dim()), k = matvec(wk, xn, kvd), v = matvec(wv, xn, kvd);
      if (c.qkv_bias) {
        const auto bq = tensor_f32(f, b + "attn_q.bias"), bk = tensor_f32(f, b + "attn_k.bias"),
                   bv = tensor_f32(f, b + "attn_v.bias");
        for (int i = 0; i < c.q_dim(); ++i) q[size_t(i)] += bq[size_t(i)];
        for (int i = 0; i < kvd; ++i) k[size_t(i)] += bk[size_t(i)], v[size_t(i)] += bv[size_t(i)];
      }
      for (int h = 0; h < c.n_heads; ++h) rope(q.data() + h * hd, int(t), hd, c.rope_theta, neox);
      for (int h = 0; h < c.n_kv_heads; ++h)
        rope(k.data() + h * hd, int(t), hd, c.rope_theta, neox);
      Q.push_back(q), K.push_back(k), V.push_back(v);
    }
    for (size_t t = 0; t < xs.size(); ++t) {
      std::vector<float> att(size_t(c.q_dim()), 0.0f);
      for (int h = 0; h < c.n_heads; ++h) {
        const int kh = h / (c.n_heads / c.n_kv_heads);
        std::vector<double> s(t + 1);
        double mx = -1e300;
        for (size_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int i = 0; i < hd; ++i)
            dot += double(Q[t][size_t(h * hd + i)]) * K[j][size_t(kh * hd + i)];
          s[j] = dot / std::sqrt(double(hd));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (auto& v : s) sum += (v = std::exp(v - mx));
        for (size_t j = 0; j <= t; ++j) {
          for (int i = 0; i < hd; ++i)
            att[size_t(h * hd + i)] += float(s[j] / sum) * V[j][size_t(kh * hd + i)];
        }
      }
      const auto o = matvec(wo, att, d);
      for (int i = 0; i < d; ++i) xs[t][size_t(i)] += o[size_t(i)];
      const auto xn = rmsnorm(xs[t], fn, c.norm_eps);
      auto g = matvec(wg, xn, c.d_ff);
      const auto u = matvec(wu, xn, c.d_ff);
      for (int i = 0; i < c.d_ff; ++i) g[size_t(i)] = act(c.act, g[size_t(i)]) * u[size_t(i)];
      const auto dn = matvec(wd, g, d);
      for (int i = 0; i < d; ++i) xs[t][size_t(i)] += dn[size_t(i)];
    }
  }
  const auto xn = rmsnorm(xs.back(), tensor_f32(f, "output_norm.weight"), c.norm_eps);
  return matvec(embd, xn, c.n_vocab);
}

}  // namespace tern::reference
