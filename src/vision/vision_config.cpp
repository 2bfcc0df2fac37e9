#include "tern/vision/vision_config.h"

#include "tensor_specs.h"
#include "tern/core/error.h"
#include "tern/gguf/gguf_file.h"

namespace tern::vision {
namespace {

struct ProjectorName {
  ProjectorType type;
  std::string_view name;
};
constexpr ProjectorName kProjectors[] = {
    {ProjectorType::Idefics3, "idefics3"},
    {ProjectorType::Gemma3, "gemma3"},
    {ProjectorType::Mlp, "mlp"},
};

std::array<float, 3> rgb_triple(const gguf::GgufFile& f, const std::string& key, float def) {
  if (!f.has(key)) return {def, def, def};
  const std::vector<float> v = f.get_f32_array(key);
  if (v.size() < 3) fail(f, key + " has " + std::to_string(v.size()) + " values, expected 3");
  return {v[0], v[1], v[2]};
}

// Keeps n_patches (and everything computed from it) far from int overflow.
constexpr int kMaxPatchesPerSide = 4096;

}  // namespace

const IntHparam kVisionIntHparams[6] = {
    {"image_size", &VisionConfig::image_size},    {"patch_size", &VisionConfig::patch_size},
    {"embedding_length", &VisionConfig::d_model}, {"feed_forward_length", &VisionConfig::d_ff},
    {"block_count", &VisionConfig::n_layers},     {"attention.head_count", &VisionConfig::n_heads},
};

std::string_view projector_name(ProjectorType t) {
  for (const auto& p : kProjectors)
    if (p.type == t) return p.name;
  return "?";
}

std::optional<ProjectorType> projector_from_name(std::string_view name) {
  for (const auto& p : kProjectors)
    if (p.name == name) return p.type;
  return std::nullopt;
}

std::string supported_projectors() {
  std::string s;
  for (const auto& p : kProjectors) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

int VisionConfig::n_output_tokens() const {
  switch (projector) {
    case ProjectorType::Mlp:
      return n_patches();  // the class token is dropped
    case ProjectorType::Idefics3:
    case ProjectorType::Gemma3:
      return n_patches() / (merge * merge);
  }
  return 0;
}

int VisionConfig::n_blocks_run() const {
  if (projector == ProjectorType::Mlp && !feature_layers.empty()) return feature_layers.front();
  return n_layers;
}

VisionConfig read_vision_hparams(const gguf::GgufFile& f) {
  const std::string arch = f.get_string_or("general.architecture", "");
  if (arch != "clip")
    fail(f, "not a clip (mmproj) file: general.architecture is '" + arch + "', expected 'clip'");
  if (!f.get_bool_or("clip.has_vision_encoder", false)) {
    if (f.get_bool_or("clip.has_audio_encoder", false))
      fail(f,
           "clip file has an audio encoder only (clip.has_audio_encoder), no vision encoder: "
           "it takes audio input, not images");
    fail(f, "clip file has no vision encoder (clip.has_vision_encoder is not true)");
  }
  std::string proj = f.get_string_or("clip.projector_type", "");
  if (proj.empty()) proj = f.get_string_or("clip.vision.projector_type", "");
  if (proj.empty()) fail(f, "no projector type (clip.projector_type)");
  const auto type = projector_from_name(proj);
  if (!type)
    fail(f,
         "unsupported projector type '" + proj + "' (supported: " + supported_projectors() + ")");

  VisionConfig c;
  c.projector = *type;
  const std::string v = "clip.vision.";
  for (const IntHparam& h : kVisionIntHparams) c.*h.field = positive(f, v + std::string(h.key));
  c.ln_eps = f.get_f32(v + "attention.layer_norm_epsilon");
  c.projection_dim = int(f.get_int_or(v + "projection_dim", 0));
  c.image_mean = rgb_triple(f, v + "image_mean", 0.5f);
  c.image_std = rgb_triple(f, v + "image_std", 0.5f);
  if (f.has(v + "feature_layer")) c.feature_layers = f.get_i32_array(v + "feature_layer");
  const bool gelu = f.get_bool_or("clip.use_gelu", false);
  const bool silu = f.get_bool_or("clip.use_silu", false);
  if (gelu && silu) fail(f, "clip.use_gelu and clip.use_silu are both true");
  c.ffn = gelu ? VisionFfn::Gelu : silu ? VisionFfn::Silu : VisionFfn::GeluQuick;
  // The reference's defaults: gemma3 pools 4x4 unless told; idefics3 reads its factor.
  const uint32_t def_merge = c.projector == ProjectorType::Gemma3 ? 4 : 1;
  if (c.projector != ProjectorType::Mlp)
    c.merge = int(f.get_u32_or(v + "projector.scale_factor", def_merge));
  if (c.projector == ProjectorType::Idefics3)
    c.preproc_image_size = int(f.get_u32_or(v + "preproc_image_size", 0));
  if (c.projector == ProjectorType::Mlp && f.has(v + "image_grid_pinpoints") &&
      f.array_length(v + "image_grid_pinpoints") > 0)
    fail(f, "LLaVA-1.6 any-resolution files (clip.vision.image_grid_pinpoints) are not supported");

  // Consistency.
  auto num = [](int64_t x) { return std::to_string(x); };
  if (!(c.ln_eps > 0.0f && c.ln_eps < 1.0f))
    fail(f, v + "attention.layer_norm_epsilon = " + std::to_string(c.ln_eps) + " is out of range");
  if (c.d_model % c.n_heads != 0)
    fail(f, "embedding_length " + num(c.d_model) + " is not divisible by head_count " +
                num(c.n_heads));
  if (c.image_size % c.patch_size != 0)
    fail(f, "image_size " + num(c.image_size) + " is not a multiple of patch_size " +
                num(c.patch_size));
  if (c.patches_per_side() > kMaxPatchesPerSide)
    fail(f, "image_size / patch_size = " + num(c.patches_per_side()) +
                " patches per side, more than " + num(kMaxPatchesPerSide));
  if (f.has(v + "attention.head_count_kv") && f.get_int(v + "attention.head_count_kv") != c.n_heads)
    fail(f, v + "attention.head_count_kv differs from head_count (grouped-query ViTs are not "
                "supported)");
  if (f.has(v + "attention.head_dim") && f.get_int(v + "attention.head_dim") != c.head_dim())
    fail(f, v + "attention.head_dim is not embedding_length / head_count = " + num(c.head_dim()));
  for (int i = 0; i < 3; ++i)
    if (!(c.image_std[size_t(i)] > 0.0f)) fail(f, v + "image_std has a value that is not positive");
  for (int l : c.feature_layers)
    if (l < 0 || l > c.n_layers)
      fail(f, v + "feature_layer " + num(l) + " is out of range (block_count " + num(c.n_layers) +
                  ")");
  if (c.projector == ProjectorType::Mlp && c.feature_layers.size() > 1)
    fail(f, v + "feature_layer lists " + num(int64_t(c.feature_layers.size())) +
                " layers: stacking several feature layers (Granite Vision) is not supported");
  if (c.merge <= 0 || c.patches_per_side() % c.merge != 0)
    fail(f, v + "projector.scale_factor " + num(c.merge) + " does not divide the " +
                num(c.patches_per_side()) + " patches per side");
  return c;
}

void check_text_model(const VisionConfig& c, int text_d_model) {
  if (c.d_out != text_d_model)
    throw InvalidArgument("the vision projector outputs " + std::to_string(c.d_out) +
                          "-wide embeddings but the text model's n_embd is " +
                          std::to_string(text_d_model) + ": this mmproj belongs to another model");
}

}  // namespace tern::vision
