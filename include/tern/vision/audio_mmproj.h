#pragma once
// The audio half of a llama.cpp multimodal projector (mmproj) GGUF file: a
// Whisper-style encoder over log-mel frames and one of llama.cpp's audio
// projector heads, read and validated; views of every tensor (nothing is
// copied: they point into the GgufFile's mapping).
//
//   mel chunk (n_mel, 3000 frames)
//     -> conv1d k3 s1 p1 (n_mel -> D) + b -> GELU
//     -> conv1d k3 s2 p1 (D -> D) + b -> GELU          (1500, D)
//     -> + learned positions (the first 1500 rows of a.position_embd)
//     -> n_layers x { x += attn(LN1(x)); x += ffn_down(GELU(ffn_up(LN2(x)))) }
//        (pre-LN blocks; Q and V have biases, K none; GELU is the erf one)
//     -> qwen2a, voxtral: average pool 2 (stride 2)      (750, D)
//     -> post LN
//     -> ultravox: stack s frames (zero-padded to a multiple of s)
//                  -> RMSNorm * norm_pre -> mm.a.mlp.1 (no bias)
//                  -> SwiGLU, the SECOND half through SiLU: silu(h[H:]) * h[:H]
//                  -> RMSNorm * norm_mid -> mm.a.mlp.2 (no bias)
//        qwen2a:   mm.a.fc (+ bias)
//        voxtral:  stack s -> mm.a.mlp.1 -> GELU (erf) -> mm.a.mlp.2 (no biases)
//                                                        (tokens_per_chunk, d_out)
//
// Voxtral: llama.cpp average-pools before stacking (as above); this follows
// llama.cpp, whose embeddings the tests compare with. A stack factor that
// does not divide the rows (Ultravox's 8 and Voxtral's 4 do not) gives
// ceil(rows / s) tokens, the last one zero-padded, as llama.cpp's graph
// computes; llama.cpp b11434 itself then aborts on its own token count
// (rows / s, rounded down): tests/fixtures/audio/README.md.
//
// Keys (llama.cpp's): clip.has_audio_encoder, clip.projector_type (or
// clip.audio.projector_type in files with both encoders; Qwen2.5-Omni's
// "qwen25o" is read as qwen2a), clip.audio.{embedding_length,
// feed_forward_length, block_count, attention.head_count,
// attention.layer_norm_epsilon, num_mel_bins, projector.stack_factor}.
// Tensors: a.conv1d.{1,2}.{weight,bias}, a.position_embd.weight,
// a.blk.N.{ln1,ln2,attn_q,attn_k,attn_v,attn_out,ffn_up,ffn_down}.*,
// a.post_ln.*, mm.a.* (by projector).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/gguf/gguf_file.h"
#include "tern/vision/audio_mel.h"
#include "tern/vision/mmproj.h"

namespace tern::vision {

enum class AudioProjector { Ultravox, Qwen2a, Voxtral };

std::string_view audio_projector_name(AudioProjector p);  // "ultravox", "qwen2a", "voxtral"
std::optional<AudioProjector> audio_projector_from_name(std::string_view name);
// The special-token text llama.cpp's mtmd puts before / after a clip's rows
// ("" where it puts none): qwen2a "<|audio_bos|>" / "<|audio_eos|>", voxtral
// "[BEGIN_AUDIO]" / "", ultravox "" / "".
std::string_view audio_begin_text(AudioProjector p);
std::string_view audio_end_text(AudioProjector p);

struct AudioConfig {
  AudioProjector projector = AudioProjector::Ultravox;
  int n_mel = 128;          // clip.audio.num_mel_bins (80 or 128)
  int d_model = 0;          // D, clip.audio.embedding_length
  int d_ff = 0;             // clip.audio.feed_forward_length
  int n_layers = 0;         // clip.audio.block_count
  int n_heads = 0;          // clip.audio.attention.head_count
  float ln_eps = 1e-5f;     // clip.audio.attention.layer_norm_epsilon
  int n_pos_table = 0;      // rows of a.position_embd (>= n_positions(); Whisper: 1500)
  int stack_factor = 1;     // ultravox / voxtral: frames stacked per token
  int d_proj_hidden = 0;    // ultravox: H (mm.a.mlp.1 outputs 2H); voxtral: mm.a.mlp.1's width
  int d_out = 0;            // the projector's output width = the text model's n_embd
  bool has_post_ln = true;  // a.post_ln.* (Whisper has it)

  int head_dim() const { return d_model / n_heads; }
  // The features of one 30 s chunk as llama.cpp computes them.
  MelConfig mel() const { return MelConfig{n_mel, 400, 160, 16000}; }
  static constexpr int kFrames = kMelChunkFrames;  // mel frames per chunk (3000)
  int n_positions() const { return kFrames / 2; }  // after the stride-2 conv (1500)
  int n_pooled() const;                            // after the average pool (qwen2a, voxtral)
  // Embedding rows one 30 s chunk becomes.
  int tokens_per_chunk() const;
};

// Whisper encoder + projector tensors. The blocks reuse the ViT's layout
// (VisionLayerWeights; k_b stays null: Whisper's K has no bias). Shapes are
// GGUF dims (dims[0] fastest); "matrix [in, out]" maps in -> out.
struct AudioWeights {
  Tensor conv1_w = nullptr, conv1_b = nullptr;      // [3, n_mel, D], [1, D]
  Tensor conv2_w = nullptr, conv2_b = nullptr;      // [3, D, D], [1, D]
  Tensor pos_embd = nullptr;                        // [D, n_pos_table]
  std::vector<VisionLayerWeights> layers;           // n_layers
  Tensor post_ln_w = nullptr, post_ln_b = nullptr;  // [D]
  // Projector, by type:
  Tensor norm_pre_w = nullptr;            // ultravox: [D s]
  Tensor mlp1_w = nullptr;                // ultravox: [D s, 2H]; voxtral: [D s, H]
  Tensor norm_mid_w = nullptr;            // ultravox: [H]
  Tensor mlp2_w = nullptr;                // ultravox, voxtral: [H, O]
  Tensor fc_w = nullptr, fc_b = nullptr;  // qwen2a: [D, O], [O]
};

class AudioMmproj {
 public:
  // Throws IoError if unreadable, FormatError "<path>: <problem>" if the
  // file has no audio encoder (clip.has_audio_encoder), names an audio
  // projector tern does not run (by name), or lacks / misshapes a tensor
  // (by name).
  static AudioMmproj open(const std::string& path);
  static AudioMmproj from_file(gguf::GgufFile f);
  // Over caller-owned bytes (kept alive by the caller).
  static AudioMmproj from_memory(std::span<const uint8_t> bytes, std::string name);

  const AudioConfig& config() const { return config_; }
  const AudioWeights& weights() const { return weights_; }
  const gguf::GgufFile& file() const { return file_; }

 private:
  explicit AudioMmproj(gguf::GgufFile f);
  gguf::GgufFile file_;
  AudioConfig config_;
  AudioWeights weights_;
};

// Which encoders a clip file declares (clip.has_vision_encoder /
// clip.has_audio_encoder), read from the header only. Throws IoError /
// FormatError for an unreadable or non-GGUF file.
struct MmprojModalities {
  bool vision = false;
  bool audio = false;
};
MmprojModalities mmproj_modalities(const std::string& path);
inline bool mmproj_has_audio(const std::string& path) {
  return mmproj_modalities(path).audio;
}

// The audio hyperparameters alone (no tensors); FormatError as open().
AudioConfig read_audio_hparams(const gguf::GgufFile& f);

// Throws InvalidArgument when the projector's width is not the text model's.
void check_text_model(const AudioConfig& c, int text_d_model);

}  // namespace tern::vision
