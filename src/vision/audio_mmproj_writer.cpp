#include "tern/vision/audio_mmproj_writer.h"

#include <random>

#include "audio_specs.h"
#include "tern/core/error.h"
#include "tern/kernels/dequant.h"

namespace tern::vision {
namespace {

struct AudioPresetDims {
  int n_mel, d_model, d_ff, layers, heads, stack, hidden, out;
};

struct AudioPreset {
  AudioProjector type;
  AudioPresetDims tiny, real;
  const char* real_name;
};

constexpr AudioPreset kAudioPresets[] = {
    {AudioProjector::Ultravox,
     {128, 64, 128, 2, 4, 4, 64, 64},
     {128, 1280, 5120, 32, 20, 8, 4096, 2048},
     "random Ultravox v0.5 audio (Whisper-large-v3 encoder)"},
    {AudioProjector::Qwen2a,
     {80, 64, 128, 2, 4, 1, 0, 64},
     {128, 1280, 5120, 32, 20, 1, 0, 4096},
     "random Qwen2-Audio audio (Whisper-large-v3 encoder)"},
    {AudioProjector::Voxtral,
     {128, 64, 128, 2, 4, 2, 96, 64},
     {128, 1280, 5120, 32, 20, 4, 3072, 3072},
     "random Voxtral Mini audio (Whisper-large-v3 encoder)"},
};

void write_metadata(gguf::GgufWriter& w, const AudioMmprojSpec& s) {
  const AudioConfig& c = s.config;
  const std::string a = "clip.audio.";
  w.set_string("general.architecture", "clip");
  w.set_string("general.name", s.name);
  w.set_bool("clip.has_vision_encoder", false);
  w.set_bool("clip.has_audio_encoder", true);
  w.set_string("clip.projector_type", std::string(audio_projector_name(c.projector)));
  w.set_u32(a + "embedding_length", uint32_t(c.d_model));
  w.set_u32(a + "feed_forward_length", uint32_t(c.d_ff));
  w.set_u32(a + "block_count", uint32_t(c.n_layers));
  w.set_u32(a + "attention.head_count", uint32_t(c.n_heads));
  w.set_f32(a + "attention.layer_norm_epsilon", c.ln_eps);
  w.set_u32(a + "projection_dim", uint32_t(c.d_out));
  w.set_u32(a + "num_mel_bins", uint32_t(c.n_mel));
  if (c.projector != AudioProjector::Qwen2a)
    w.set_u32(a + "projector.stack_factor", uint32_t(c.stack_factor));
}

// Linear weights and conv kernels get unit output variance (fan_in inputs
// per output); the rest as random_tensor_values decides.
int64_t fan_in(const AudioTensorSpec& t, const std::vector<int64_t>& dims) {
  if (t.kind == TensorKind::Matrix) return dims[0];
  if (t.name.starts_with("a.conv1d.") && t.name.ends_with(".weight") && dims.size() >= 2)
    return dims[0] * dims[1];
  return 0;
}

DType storage_type(const AudioMmprojSpec& s, const AudioTensorSpec& t, int64_t row) {
  if (t.kind == TensorKind::Vector) return DType::F32;
  if (t.kind == TensorKind::Embedding) return s.conv_type;
  const DType m = s.matrix_type;
  return row % int64_t(dtype_traits(m).block_elems) == 0 ? m : DType::F16;
}

}  // namespace

AudioMmprojSpec audio_mmproj_preset(AudioProjector type, MmprojShape shape) {
  const bool real = shape == MmprojShape::Real;
  for (const AudioPreset& p : kAudioPresets) {
    if (p.type != type) continue;
    const AudioPresetDims& d = real ? p.real : p.tiny;
    AudioMmprojSpec s;
    s.config = AudioConfig{.projector = type,
                           .n_mel = d.n_mel,
                           .d_model = d.d_model,
                           .d_ff = d.d_ff,
                           .n_layers = d.layers,
                           .n_heads = d.heads,
                           .ln_eps = 1e-5f,
                           .n_pos_table = 1500,
                           .stack_factor = d.stack,
                           .d_proj_hidden = d.hidden,
                           .d_out = d.out,
                           .has_post_ln = true};
    s.name = real ? p.real_name : "tiny " + std::string(audio_projector_name(type)) + " audio";
    return s;
  }
  throw InvalidArgument("no audio mmproj preset for " + std::string(audio_projector_name(type)));
}

gguf::GgufWriter build_audio_mmproj(const AudioMmprojSpec& s) {
  gguf::GgufWriter w;
  write_metadata(w, s);
  std::mt19937 rng(s.seed);
  for (const AudioTensorSpec& t : audio_tensor_specs(s.config)) {
    std::vector<int64_t> dims = t.dims;
    if (s.edit && !s.edit(t.name, dims)) continue;
    const std::vector<float> values = random_tensor_values(t.name, fan_in(t, dims), dims, rng);
    const DType type = storage_type(s, t, dims[0]);
    w.add_tensor(t.name, type, dims, kernels::quantize_ref(type, values));
  }
  return w;
}

void write_audio_mmproj(const AudioMmprojSpec& s, const std::string& path) {
  build_audio_mmproj(s).write(path);
}

}  // namespace tern::vision
