#include "tern/vision/mmproj_writer.h"

#include <random>

#include "tensor_specs.h"
#include "tern/core/error.h"
#include "tern/kernels/dequant.h"

namespace tern::vision {
namespace {

// The numbers that differ between the presets.
struct PresetDims {
  int image, patch, d_model, d_ff, layers, heads, merge, hidden, out;
};

struct Preset {
  ProjectorType type;
  bool clip;  // CLIP ViT (class token, pre-LN, quick GELU) rather than SigLIP
  PresetDims tiny, real;
  const char* real_name;
};

constexpr Preset kPresets[] = {
    {ProjectorType::Idefics3,
     false,
     {32, 8, 32, 64, 2, 4, 2, 0, 64},
     {512, 16, 768, 3072, 12, 12, 4, 0, 576},
     "random SmolVLM-256M vision (SigLIP-B/16-512)"},
    {ProjectorType::Gemma3,
     false,
     {32, 8, 32, 64, 2, 4, 2, 0, 64},
     {896, 14, 1152, 4304, 27, 16, 4, 0, 640},
     "random Gemma 3 vision (SigLIP so400m/14-896)"},
    {ProjectorType::Mlp,
     true,
     {32, 8, 32, 64, 2, 4, 1, 64, 64},
     {336, 14, 1024, 4096, 23, 16, 1, 4096, 4096},
     "random LLaVA-1.5 vision (CLIP ViT-L/14-336)"},
};

VisionConfig preset_config(const Preset& p, const PresetDims& d) {
  VisionConfig c{.projector = p.type,
                 .image_size = d.image,
                 .patch_size = d.patch,
                 .d_model = d.d_model,
                 .d_ff = d.d_ff,
                 .n_layers = d.layers,
                 .n_heads = d.heads,
                 .ln_eps = p.clip ? 1e-5f : 1e-6f,
                 .merge = d.merge,
                 // No clip.vision.feature_layer, as llama.cpp's legacy converter writes
                 // LLaVA-1.5 (the blocks after its "-2" layer are not stored): every
                 // stored block runs (vision_config.h).
                 .feature_layers = {},
                 // SmolVLM's processor: longest edge 4 tiles (2048 for 512 tiles);
                 // tiny files use 2 so a square image is a 2x2 grid.
                 .preproc_image_size =
                     p.type == ProjectorType::Idefics3 ? (d.image >= 256 ? 4 : 2) * d.image : 0,
                 .ffn = p.clip ? VisionFfn::GeluQuick : VisionFfn::Gelu,
                 .has_patch_bias = !p.clip,
                 .has_class_embd = p.clip,
                 .has_pre_ln = p.clip,
                 .has_post_ln = !p.clip,
                 .d_proj_hidden = d.hidden,
                 .d_out = d.out};
  if (p.clip) {  // OpenAI CLIP's normalization
    c.image_mean = {0.48145466f, 0.4578275f, 0.40821073f};
    c.image_std = {0.26862954f, 0.26130258f, 0.27577711f};
  }
  return c;
}

void write_metadata(gguf::GgufWriter& w, const MmprojSpec& s) {
  const VisionConfig& c = s.config;
  const std::string v = "clip.vision.";
  w.set_string("general.architecture", "clip");
  w.set_string("general.name", s.name);
  w.set_bool("clip.has_vision_encoder", true);
  w.set_string("clip.projector_type", std::string(projector_name(c.projector)));
  w.set_bool("clip.use_gelu", c.ffn == VisionFfn::Gelu);
  if (c.ffn == VisionFfn::Silu) w.set_bool("clip.use_silu", true);
  for (const IntHparam& h : kVisionIntHparams)
    w.set_u32(v + std::string(h.key), uint32_t(c.*h.field));
  w.set_f32(v + "attention.layer_norm_epsilon", c.ln_eps);
  w.set_u32(v + "projection_dim", uint32_t(c.projection_dim ? c.projection_dim : c.d_out));
  w.set_f32_array(v + "image_mean", {c.image_mean.begin(), c.image_mean.end()});
  w.set_f32_array(v + "image_std", {c.image_std.begin(), c.image_std.end()});
  if (c.projector != ProjectorType::Mlp) w.set_u32(v + "projector.scale_factor", uint32_t(c.merge));
  if (c.preproc_image_size > 0) w.set_u32(v + "preproc_image_size", uint32_t(c.preproc_image_size));
  if (!c.feature_layers.empty()) w.set_i32_array(v + "feature_layer", c.feature_layers);
}

DType storage_type(const MmprojSpec& s, const TensorSpec& t, int64_t row) {
  if (t.kind == TensorKind::Vector) return DType::F32;
  if (t.kind == TensorKind::Embedding) return s.embed_type;
  const DType m = s.matrix_type;
  return row % int64_t(dtype_traits(m).block_elems) == 0 ? m : DType::F16;
}

}  // namespace

MmprojSpec mmproj_preset(ProjectorType type, MmprojShape shape) {
  const bool real = shape == MmprojShape::Real;
  for (const Preset& p : kPresets) {
    if (p.type != type) continue;
    MmprojSpec s;
    s.config = preset_config(p, real ? p.real : p.tiny);
    s.name = real ? p.real_name : "tiny " + std::string(projector_name(type));
    return s;
  }
  throw InvalidArgument("no mmproj preset for projector type " + std::string(projector_name(type)));
}

gguf::GgufWriter build_mmproj(const MmprojSpec& s) {
  gguf::GgufWriter w;
  write_metadata(w, s);
  std::mt19937 rng(s.seed);
  for (const TensorSpec& t : vision_tensor_specs(s.config)) {
    std::vector<int64_t> dims = t.dims;
    if (s.edit && !s.edit(t.name, dims)) continue;
    const std::vector<float> values =
        random_tensor_values(t.name, t.kind == TensorKind::Matrix ? dims[0] : 0, dims, rng);
    const DType type = storage_type(s, t, dims[0]);
    w.add_tensor(t.name, type, dims, kernels::quantize_ref(type, values));
  }
  return w;
}

void write_mmproj(const MmprojSpec& s, const std::string& path) {
  build_mmproj(s).write(path);
}

}  // namespace tern::vision
