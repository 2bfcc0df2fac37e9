#include "tern/vision/mmproj.h"

#include "tensor_specs.h"

namespace tern::vision {
namespace {

const gguf::TensorInfo& need(const gguf::GgufFile& f, const std::string& name, ProjectorType p) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t)
    fail(f, "missing tensor '" + name + "' (needed by the " + std::string(projector_name(p)) +
                " vision encoder)");
  return *t;
}

// dims[i] of a tensor the shapes are read from; 0 when it has fewer dims
// (the shape check then reports the mismatch).
int64_t dim_of(const gguf::TensorInfo& t, size_t i) {
  return i < t.dims.size() ? t.dims[i] : 0;
}

// Fills in the config fields that come from the tensors: which optional ones
// exist, the legacy ffn naming, and the projector's widths.
void detect_from_tensors(const gguf::GgufFile& f, VisionConfig& c) {
  auto has = [&](const std::string& n) { return f.find_tensor(n) != nullptr; };
  c.has_patch_bias = has("v.patch_embd.bias");
  c.has_class_embd = has("v.class_embd");
  c.has_pre_ln = has("v.pre_ln.weight") || has("v.pre_ln.bias");
  c.has_post_ln = has("v.post_ln.weight") || has("v.post_ln.bias");
  if (has("v.blk.0.attn_qkv.weight"))
    fail(f, "fused attention tensors (v.blk.N.attn_qkv) are not supported");
  const auto* down = f.find_tensor("v.blk.0.ffn_down.weight");
  c.ffn_swapped = down && c.d_model != c.d_ff && dim_of(*down, 0) == c.d_model;

  switch (c.projector) {
    case ProjectorType::Mlp:
      if (has("mm.3.weight"))
        fail(f, "the mlp projector with a norm (mm.3, Yi-style LLaVA) is not supported");
      if (c.has_post_ln)
        fail(f,
             "an mlp (LLaVA) file with v.post_ln is not supported: LLaVA takes its features "
             "from a hidden layer, before CLIP's post-LN");
      c.d_proj_hidden = int(dim_of(need(f, "mm.0.weight", c.projector), 1));
      c.d_out = int(dim_of(need(f, "mm.2.weight", c.projector), 1));
      break;
    case ProjectorType::Idefics3:
      c.d_out = int(dim_of(need(f, "mm.model.fc.weight", c.projector), 1));
      break;
    case ProjectorType::Gemma3:
      c.d_out = int(dim_of(need(f, "mm.input_projection.weight", c.projector), 0));
      break;
  }
  if (c.d_out <= 0) fail(f, "cannot tell the projector's output width from its tensors");
  const std::string extra = "v.blk." + std::to_string(c.n_layers) + ".ln1.weight";
  if (has(extra))
    fail(f, "tensor '" + extra +
                "' is beyond clip.vision.block_count = " + std::to_string(c.n_layers));
}

// Checks every tensor `c` needs and binds its view into `w`.
void validate_and_bind(const gguf::GgufFile& f, const VisionConfig& c, VisionWeights& w) {
  w.layers.assign(size_t(c.n_layers), VisionLayerWeights{});
  bind_tensors(f, vision_tensor_specs(c), w,
               [&](const std::string& name) -> const gguf::TensorInfo& {
                 return need(f, name, c.projector);
               });
}

}  // namespace

Mmproj::Mmproj(gguf::GgufFile f) : file_(std::move(f)) {
  config_ = read_vision_hparams(file_);
  detect_from_tensors(file_, config_);
  validate_and_bind(file_, config_, weights_);
}

Mmproj Mmproj::open(const std::string& path) {
  return Mmproj(gguf::GgufFile::open(path));
}

Mmproj Mmproj::from_memory(std::span<const uint8_t> bytes, std::string name) {
  return Mmproj(gguf::GgufFile::from_memory(bytes, std::move(name)));
}

}  // namespace tern::vision
