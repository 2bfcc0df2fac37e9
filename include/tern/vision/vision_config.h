#pragma once
// The shape of a vision encoder + projector, as read from a llama.cpp
// multimodal projector ("mmproj") GGUF file. Architecture is data: the
// projector type picks the head after the ViT, everything else is numbers
// and flags for which optional tensors the file carries.
//
//   image (image_size, image_size, 3)
//     -> patch embedding (conv patch_size x patch_size, stride patch_size)
//     -> [class token] + learned positions       (n_positions, d_model)
//     -> [pre_ln] -> n_layers ViT blocks -> [post_ln]
//     -> projector                                (n_output_tokens, d_out)
//
//   mlp      (LLaVA-1.5)  drop class token; mm.0 -> GELU -> mm.2
//   idefics3 (SmolVLM)    pixel shuffle by `merge` per side; mm.model.fc
//   gemma3                avg-pool merge x merge; RMS norm; mm.input_projection
#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern::gguf {
class GgufFile;
}

namespace tern::vision {

enum class ProjectorType { Idefics3, Gemma3, Mlp };

// The activation of the ViT feed-forward (clip.use_gelu / clip.use_silu;
// neither means CLIP's quick GELU).
enum class VisionFfn { GeluQuick, Gelu, Silu };

std::string_view projector_name(ProjectorType t);  // "idefics3", "gemma3", "mlp"
std::optional<ProjectorType> projector_from_name(std::string_view name);
std::string supported_projectors();  // "idefics3, gemma3, mlp"

struct VisionConfig {
  ProjectorType projector = ProjectorType::Mlp;
  int image_size = 0;  // input side in pixels (square)
  int patch_size = 0;
  int d_model = 0;  // clip.vision.embedding_length
  int d_ff = 0;     // clip.vision.feed_forward_length
  int n_layers = 0;
  int n_heads = 0;
  float ln_eps = 1e-6f;
  std::array<float, 3> image_mean{0.5f, 0.5f, 0.5f};
  std::array<float, 3> image_std{0.5f, 0.5f, 0.5f};
  int projection_dim = 0;           // as declared in the metadata (0: absent); informational
  int merge = 1;                    // idefics3 scale factor / gemma3 pool size, per side
  std::vector<int> feature_layers;  // clip.vision.feature_layer (empty: the projector's default)
  int preproc_image_size = 0;       // idefics3: clip.vision.preproc_image_size, the longest
                                    // edge before tiling (0: absent)
  VisionFfn ffn = VisionFfn::GeluQuick;

  // Which optional tensors the file has (found by name when loading).
  bool has_patch_bias = false;  // v.patch_embd.bias
  bool has_class_embd = false;  // v.class_embd (CLIP)
  bool has_pre_ln = false;      // v.pre_ln.{weight,bias} (CLIP)
  bool has_post_ln = false;     // v.post_ln.{weight,bias} (SigLIP)
  bool ffn_swapped = false;     // legacy files name fc1 "ffn_down": detected by shape

  int d_proj_hidden = 0;  // mlp: width between mm.0 and mm.2
  int d_out = 0;          // projector output width = the text model's n_embd

  int head_dim() const { return d_model / n_heads; }
  int patches_per_side() const { return image_size / patch_size; }
  int n_patches() const { return patches_per_side() * patches_per_side(); }
  int n_positions() const { return n_patches() + (has_class_embd ? 1 : 0); }
  // The ViT blocks the encoder runs. mlp (LLaVA) takes the hidden state named
  // by clip.vision.feature_layer = {l}: the output of block l-1 (l blocks run,
  // no post-LN). Without that key, as for every other type, all stored blocks
  // run: LLaVA's converter already dropped the blocks after its feature layer
  // (the last of 24 for LLaVA-1.5's "-2"). This llama.cpp runs one block
  // fewer there (llama.cpp #25817; the peer is patched, see
  // tests/fixtures/vision/README.md).
  int n_blocks_run() const;
  // Embedding rows one image becomes in the text model.
  int n_output_tokens() const;
};

// The required positive integer hyperparameters and their keys
// (clip.vision.<key>): read by read_vision_hparams, written by the generator.
struct IntHparam {
  std::string_view key;
  int VisionConfig::*field;
};
extern const IntHparam kVisionIntHparams[6];

// Reads the hyperparameters (not the tensor-derived fields) from a clip file
// and checks them for consistency. Throws FormatError "<path>: <problem>".
VisionConfig read_vision_hparams(const gguf::GgufFile& f);

// Throws InvalidArgument when the projector's output width is not the text
// model's embedding width, naming both numbers.
void check_text_model(const VisionConfig& c, int text_d_model);

}  // namespace tern::vision
