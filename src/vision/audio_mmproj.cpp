// Reading the audio half of an mmproj file: hyperparameters, the tensor
// list each projector type needs, validation and binding.
#include "tern/vision/audio_mmproj.h"

#include "audio_specs.h"
#include "tern/core/error.h"

namespace tern::vision {
namespace {

struct AudioProjectorName {
  AudioProjector type;
  std::string_view name;
  std::string_view begin, end;  // mtmd's wrapping text
};
constexpr AudioProjectorName kAudioProjectors[] = {
    {AudioProjector::Ultravox, "ultravox", "", ""},
    {AudioProjector::Qwen2a, "qwen2a", "<|audio_bos|>", "<|audio_eos|>"},
    {AudioProjector::Voxtral, "voxtral", "[BEGIN_AUDIO]", ""},
};

int64_t dim_of(const gguf::TensorInfo* t, size_t i) {
  return t && i < t->dims.size() ? t->dims[i] : 0;
}

const gguf::TensorInfo& need(const gguf::GgufFile& f, const std::string& name, AudioProjector p) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t)
    fail(f, "missing tensor '" + name + "' (needed by the " + std::string(audio_projector_name(p)) +
                " audio encoder)");
  return *t;
}

// The widths only the tensors tell: the position table's length and the
// projector's hidden and output widths.
void detect_from_tensors(const gguf::GgufFile& f, AudioConfig& c) {
  c.n_pos_table = int(dim_of(&need(f, "a.position_embd.weight", c.projector), 1));
  if (c.n_pos_table < c.n_positions())
    fail(f, "tensor 'a.position_embd.weight' has " + std::to_string(c.n_pos_table) +
                " positions, fewer than the " + std::to_string(c.n_positions()) +
                " a 30 s chunk needs");
  c.has_post_ln = f.find_tensor("a.post_ln.weight") || f.find_tensor("a.post_ln.bias");
  switch (c.projector) {
    case AudioProjector::Ultravox:
      c.d_proj_hidden = int(dim_of(&need(f, "mm.a.mlp.2.weight", c.projector), 0));
      c.d_out = int(dim_of(&need(f, "mm.a.mlp.2.weight", c.projector), 1));
      break;
    case AudioProjector::Voxtral:
      c.d_proj_hidden = int(dim_of(&need(f, "mm.a.mlp.1.weight", c.projector), 1));
      c.d_out = int(dim_of(&need(f, "mm.a.mlp.2.weight", c.projector), 1));
      break;
    case AudioProjector::Qwen2a:
      c.d_out = int(dim_of(&need(f, "mm.a.fc.weight", c.projector), 1));
      break;
  }
  if (c.d_out <= 0) fail(f, "cannot tell the audio projector's output width from its tensors");
  const std::string extra = "a.blk." + std::to_string(c.n_layers) + ".ln1.weight";
  if (f.find_tensor(extra))
    fail(f,
         "tensor '" + extra + "' is beyond clip.audio.block_count = " + std::to_string(c.n_layers));
}

void validate_and_bind(const gguf::GgufFile& f, const AudioConfig& c, AudioWeights& w) {
  w.layers.assign(size_t(c.n_layers), VisionLayerWeights{});
  bind_tensors(f, audio_tensor_specs(c), w,
               [&](const std::string& name) -> const gguf::TensorInfo& {
                 return need(f, name, c.projector);
               });
}

}  // namespace

std::string_view audio_projector_name(AudioProjector p) {
  for (const auto& a : kAudioProjectors)
    if (a.type == p) return a.name;
  return "?";
}

std::optional<AudioProjector> audio_projector_from_name(std::string_view name) {
  for (const auto& a : kAudioProjectors)
    if (a.name == name) return a.type;
  if (name == "qwen25o") return AudioProjector::Qwen2a;  // Qwen2.5-Omni's audio tower
  return std::nullopt;
}

std::string_view audio_begin_text(AudioProjector p) {
  for (const auto& a : kAudioProjectors)
    if (a.type == p) return a.begin;
  return "";
}
std::string_view audio_end_text(AudioProjector p) {
  for (const auto& a : kAudioProjectors)
    if (a.type == p) return a.end;
  return "";
}

int AudioConfig::n_pooled() const {
  return projector == AudioProjector::Ultravox ? n_positions() : n_positions() / 2;
}

int AudioConfig::tokens_per_chunk() const {
  const int s = projector == AudioProjector::Qwen2a ? 1 : stack_factor;
  return (n_pooled() + s - 1) / s;
}

std::vector<AudioTensorSpec> audio_tensor_specs(const AudioConfig& c) {
  const int64_t D = c.d_model, S = c.stack_factor, H = c.d_proj_hidden, O = c.d_out;
  constexpr auto M = TensorKind::Matrix, V = TensorKind::Vector, E = TensorKind::Embedding;
  using W = AudioWeights;
  std::vector<AudioTensorSpec> s;
  auto global = [&](std::string name, std::vector<int64_t> dims, TensorKind k, Tensor W::*slot) {
    s.push_back({std::move(name), std::move(dims), k, -1, slot, nullptr});
  };
  global("a.conv1d.1.weight", {3, c.n_mel, D}, E, &W::conv1_w);
  global("a.conv1d.1.bias", {1, D}, V, &W::conv1_b);
  global("a.conv1d.2.weight", {3, D, D}, E, &W::conv2_w);
  global("a.conv1d.2.bias", {1, D}, V, &W::conv2_b);
  // F32 or F16 like a vector; llama.cpp adds it to F32 activations directly.
  global("a.position_embd.weight", {D, c.n_pos_table}, V, &W::pos_embd);
  for (int il = 0; il < c.n_layers; ++il)
    for (BlockTensor& t : block_tensors(D, c.d_ff, false, false))
      s.push_back({"a.blk." + std::to_string(il) + "." + t.suffix, std::move(t.dims), t.kind, il,
                   nullptr, t.member});
  if (c.has_post_ln) {
    global("a.post_ln.weight", {D}, V, &W::post_ln_w);
    global("a.post_ln.bias", {D}, V, &W::post_ln_b);
  }
  switch (c.projector) {
    case AudioProjector::Ultravox:
      global("mm.a.norm_pre.weight", {D * S}, V, &W::norm_pre_w);
      global("mm.a.mlp.1.weight", {D * S, 2 * H}, M, &W::mlp1_w);
      global("mm.a.norm_mid.weight", {H}, V, &W::norm_mid_w);
      global("mm.a.mlp.2.weight", {H, O}, M, &W::mlp2_w);
      break;
    case AudioProjector::Voxtral:
      global("mm.a.mlp.1.weight", {D * S, H}, M, &W::mlp1_w);
      global("mm.a.mlp.2.weight", {H, O}, M, &W::mlp2_w);
      break;
    case AudioProjector::Qwen2a:
      global("mm.a.fc.weight", {D, O}, M, &W::fc_w);
      global("mm.a.fc.bias", {O}, V, &W::fc_b);
      break;
  }
  return s;
}

AudioConfig read_audio_hparams(const gguf::GgufFile& f) {
  const std::string arch = f.get_string_or("general.architecture", "");
  if (arch != "clip")
    fail(f, "not a clip (mmproj) file: general.architecture is '" + arch + "', expected 'clip'");
  if (!f.get_bool_or("clip.has_audio_encoder", false))
    fail(f, "clip file has no audio encoder (clip.has_audio_encoder is not true)");
  std::string proj = f.get_string_or("clip.audio.projector_type", "");
  if (proj.empty()) proj = f.get_string_or("clip.projector_type", "");
  if (proj.empty()) fail(f, "no audio projector type (clip.projector_type)");
  const auto type = audio_projector_from_name(proj);
  if (!type)
    fail(f, "unsupported audio projector type '" + proj +
                "' (supported: ultravox, qwen2a, qwen25o, voxtral)");
  AudioConfig c;
  c.projector = *type;
  const std::string a = "clip.audio.";
  c.d_model = positive(f, a + "embedding_length");
  c.d_ff = positive(f, a + "feed_forward_length");
  c.n_layers = positive(f, a + "block_count");
  c.n_heads = positive(f, a + "attention.head_count");
  c.n_mel = positive(f, a + "num_mel_bins");
  c.ln_eps = f.get_f32(a + "attention.layer_norm_epsilon");
  if (c.projector != AudioProjector::Qwen2a)
    c.stack_factor = positive(f, a + "projector.stack_factor");
  auto num = [](int64_t x) { return std::to_string(x); };
  if (!(c.ln_eps > 0.0f && c.ln_eps < 1.0f))
    fail(f, a + "attention.layer_norm_epsilon = " + std::to_string(c.ln_eps) + " is out of range");
  if (c.d_model % c.n_heads != 0)
    fail(f, a + "embedding_length " + num(c.d_model) + " is not divisible by head_count " +
                num(c.n_heads));
  if (c.n_mel > 512) fail(f, a + "num_mel_bins = " + num(c.n_mel) + " is out of range");
  if (c.stack_factor > 64)
    fail(f, a + "projector.stack_factor = " + num(c.stack_factor) + " is out of range");
  return c;
}

void check_text_model(const AudioConfig& c, int text_d_model) {
  if (c.d_out != text_d_model)
    throw InvalidArgument("the audio projector outputs " + std::to_string(c.d_out) +
                          "-wide embeddings but the text model's n_embd is " +
                          std::to_string(text_d_model) + ": this mmproj belongs to another model");
}

AudioMmproj::AudioMmproj(gguf::GgufFile f) : file_(std::move(f)) {
  config_ = read_audio_hparams(file_);
  detect_from_tensors(file_, config_);
  validate_and_bind(file_, config_, weights_);
}

AudioMmproj AudioMmproj::open(const std::string& path) {
  return AudioMmproj(gguf::GgufFile::open(path));
}
AudioMmproj AudioMmproj::from_file(gguf::GgufFile f) {
  return AudioMmproj(std::move(f));
}
AudioMmproj AudioMmproj::from_memory(std::span<const uint8_t> bytes, std::string name) {
  return AudioMmproj(gguf::GgufFile::from_memory(bytes, std::move(name)));
}

MmprojModalities mmproj_modalities(const std::string& path) {
  const gguf::GgufFile f = gguf::GgufFile::open(path);
  return {f.get_bool_or("clip.has_vision_encoder", false),
          f.get_bool_or("clip.has_audio_encoder", false)};
}

}  // namespace tern::vision
