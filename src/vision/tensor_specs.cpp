#include "tensor_specs.h"

#include <cmath>

#include "tern/gguf/gguf_file.h"

namespace tern::vision {
namespace {

using L = VisionLayerWeights;
using W = VisionWeights;

struct Builder {
  std::vector<TensorSpec> specs;
  void global(std::string name, std::vector<int64_t> dims, TensorKind k, Tensor W::*slot) {
    specs.push_back({std::move(name), std::move(dims), k, -1, slot, nullptr});
  }
  void layer(int il, const std::string& suffix, std::vector<int64_t> dims, TensorKind k,
             Tensor L::*slot) {
    specs.push_back(
        {"v.blk." + std::to_string(il) + "." + suffix, std::move(dims), k, il, nullptr, slot});
  }
};

void add_block(Builder& b, const VisionConfig& c, int il) {
  for (BlockTensor& t : block_tensors(c.d_model, c.d_ff, c.ffn_swapped, true))
    b.layer(il, t.suffix, std::move(t.dims), t.kind, t.member);
}

void add_projector(Builder& b, const VisionConfig& c) {
  const int64_t D = c.d_model, O = c.d_out, H = c.d_proj_hidden;
  constexpr auto M = TensorKind::Matrix, V = TensorKind::Vector;
  switch (c.projector) {
    case ProjectorType::Mlp:
      b.global("mm.0.weight", {D, H}, M, &W::mm0_w);
      b.global("mm.0.bias", {H}, V, &W::mm0_b);
      b.global("mm.2.weight", {H, O}, M, &W::mm2_w);
      b.global("mm.2.bias", {O}, V, &W::mm2_b);
      break;
    case ProjectorType::Idefics3:
      b.global("mm.model.fc.weight", {D * c.merge * c.merge, O}, M, &W::fc_w);
      break;
    case ProjectorType::Gemma3:
      b.global("mm.soft_emb_norm.weight", {D}, V, &W::soft_norm_w);
      b.global("mm.input_projection.weight", {O, D}, M, &W::input_proj_w);
      break;
  }
}

}  // namespace

std::vector<BlockTensor> block_tensors(int64_t D, int64_t F, bool ffn_swapped, bool k_bias) {
  constexpr auto M = TensorKind::Matrix, V = TensorKind::Vector;
  std::vector<BlockTensor> b;
  b.push_back({"ln1.weight", {D}, V, &L::ln1_w});
  b.push_back({"ln1.bias", {D}, V, &L::ln1_b});
  const struct {
    const char* name;
    Tensor L::*w;
    Tensor L::*bias;
  } attn[] = {
      {"attn_q", &L::q_w, &L::q_b},
      {"attn_k", &L::k_w, &L::k_b},
      {"attn_v", &L::v_w, &L::v_b},
      {"attn_out", &L::o_w, &L::o_b},
  };
  for (const auto& a : attn) {
    b.push_back({std::string(a.name) + ".weight", {D, D}, M, a.w});
    if (k_bias || a.w != &L::k_w) b.push_back({std::string(a.name) + ".bias", {D}, V, a.bias});
  }
  b.push_back({"ln2.weight", {D}, V, &L::ln2_w});
  b.push_back({"ln2.bias", {D}, V, &L::ln2_b});
  // fc1 (D -> F) is "ffn_up" and fc2 (F -> D) "ffn_down", except in legacy
  // files that named them the other way round.
  const std::string fc1 = ffn_swapped ? "ffn_down" : "ffn_up";
  const std::string fc2 = ffn_swapped ? "ffn_up" : "ffn_down";
  b.push_back({fc1 + ".weight", {D, F}, M, &L::up_w});
  b.push_back({fc1 + ".bias", {F}, V, &L::up_b});
  b.push_back({fc2 + ".weight", {F, D}, M, &L::down_w});
  b.push_back({fc2 + ".bias", {D}, V, &L::down_b});
  return b;
}

std::vector<TensorSpec> vision_tensor_specs(const VisionConfig& c) {
  const int64_t D = c.d_model, P = c.patch_size;
  constexpr auto E = TensorKind::Embedding, V = TensorKind::Vector;
  Builder b;
  b.global("v.patch_embd.weight", {P, P, 3, D}, E, &W::patch_w);
  if (c.has_patch_bias) b.global("v.patch_embd.bias", {D}, V, &W::patch_b);
  if (c.has_class_embd) b.global("v.class_embd", {D}, V, &W::class_embd);
  // Kind V (always written F32): llama.cpp adds the table to the patch
  // embeddings directly, and its CPU add has no F32 + F16 form, so real files
  // carry it in F32 (the patch kernel, a convolution, may be F16).
  b.global("v.position_embd.weight", {D, c.n_positions()}, V, &W::pos_embd);
  if (c.has_pre_ln) {
    b.global("v.pre_ln.weight", {D}, V, &W::pre_ln_w);
    b.global("v.pre_ln.bias", {D}, V, &W::pre_ln_b);
  }
  for (int il = 0; il < c.n_layers; ++il) add_block(b, c, il);
  if (c.has_post_ln) {
    b.global("v.post_ln.weight", {D}, V, &W::post_ln_w);
    b.global("v.post_ln.bias", {D}, V, &W::post_ln_b);
  }
  add_projector(b, c);
  return std::move(b.specs);
}

std::vector<float> random_tensor_values(const std::string& name, int64_t fan_in,
                                        const std::vector<int64_t>& dims, std::mt19937& rng) {
  size_t n = 1;
  for (int64_t d : dims) n *= size_t(d);
  const bool is_norm =
      name.find("ln") != std::string::npos || name.find("norm") != std::string::npos;
  const bool is_bias = name.ends_with(".bias");
  float lo = -0.02f, hi = 0.02f;
  if (fan_in > 0) {
    hi = std::sqrt(3.0f / float(fan_in));
    lo = -hi;
  } else if (is_norm && !is_bias) {
    lo = 0.9f;
    hi = 1.1f;
  }
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

void fail(const gguf::GgufFile& f, const std::string& what) {
  throw FormatError(f.path() + ": " + what);
}

int positive(const gguf::GgufFile& f, const std::string& key) {
  const int64_t v = f.get_int(key);
  if (v <= 0 || v > (int64_t(1) << 24))
    fail(f, key + " = " + std::to_string(v) + " is out of range");
  return int(v);
}

bool kind_accepts(TensorKind k, DType t) {
  if (k != TensorKind::Matrix) return t == DType::F32 || t == DType::F16;
  return dtype_traits(t).dequantizable;
}

std::string_view kind_rule(TensorKind k) {
  switch (k) {
    case TensorKind::Matrix:
      return "a linear weight must be a type tern can dequantize";
    case TensorKind::Vector:
      return "a norm, bias or class vector must be F32 or F16";
    case TensorKind::Embedding:
      return "a patch or position embedding must be F32 or F16";
  }
  return "?";
}

}  // namespace tern::vision
