#pragma once
// A loaded, validated llama.cpp multimodal projector (mmproj) GGUF file:
// its VisionConfig and views of every tensor the encoder and projector use.
// Nothing is copied: the views point into the GgufFile's mapping.
//
// Shapes below are GGUF dims (dims[0] is the row length, fastest varying);
// D = d_model, F = d_ff, P = patch_size, O = d_out, H = d_proj_hidden.
// A "matrix" [in, out] maps in -> out (one row of `in` values per output).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/core/error.h"
#include "tern/gguf/gguf_file.h"
#include "tern/vision/vision_config.h"

namespace tern::vision {

using Tensor = const gguf::TensorInfo*;  // a view; nullptr when the file lacks it

struct VisionLayerWeights {
  Tensor ln1_w = nullptr, ln1_b = nullptr;    // [D]
  Tensor q_w = nullptr, q_b = nullptr;        // [D, D], [D]
  Tensor k_w = nullptr, k_b = nullptr;        // [D, D], [D]
  Tensor v_w = nullptr, v_b = nullptr;        // [D, D], [D]
  Tensor o_w = nullptr, o_b = nullptr;        // [D, D], [D]  (attn_out)
  Tensor ln2_w = nullptr, ln2_b = nullptr;    // [D]
  Tensor up_w = nullptr, up_b = nullptr;      // [D, F], [F]  (fc1)
  Tensor down_w = nullptr, down_b = nullptr;  // [F, D], [D]  (fc2)
};

struct VisionWeights {
  Tensor patch_w = nullptr;     // [P, P, 3, D]   v.patch_embd.weight (conv kernel)
  Tensor patch_b = nullptr;     // [D]            v.patch_embd.bias, optional
  Tensor class_embd = nullptr;  // [D]            v.class_embd, optional
  Tensor pos_embd = nullptr;    // [D, n_positions] v.position_embd.weight
  Tensor pre_ln_w = nullptr, pre_ln_b = nullptr;    // [D], optional
  Tensor post_ln_w = nullptr, post_ln_b = nullptr;  // [D], optional
  std::vector<VisionLayerWeights> layers;           // n_layers
  // Projector, by type:
  Tensor mm0_w = nullptr, mm0_b = nullptr;  // mlp: [D, H], [H]       mm.0.*
  Tensor mm2_w = nullptr, mm2_b = nullptr;  // mlp: [H, O], [O]       mm.2.*
  Tensor fc_w = nullptr;                    // idefics3: [D*merge^2, O] mm.model.fc.weight
  Tensor soft_norm_w = nullptr;             // gemma3: [D]            mm.soft_emb_norm.weight
  Tensor input_proj_w = nullptr;  // gemma3: [O, D] (transposed) mm.input_projection.weight
};

class Mmproj {
 public:
  // Throws IoError if unreadable, FormatError "<path>: <problem>" if the file
  // is not a valid clip file of a supported projector type.
  static Mmproj open(const std::string& path);
  // Same over caller-owned bytes (kept alive by the caller).
  static Mmproj from_memory(std::span<const uint8_t> bytes, std::string name);

  const VisionConfig& config() const { return config_; }
  const VisionWeights& weights() const { return weights_; }
  const gguf::GgufFile& file() const { return file_; }
  // Any tensor of the file by name (nullptr if absent).
  Tensor find(std::string_view name) const { return file_.find_tensor(name); }

 private:
  explicit Mmproj(gguf::GgufFile f);
  gguf::GgufFile file_;
  VisionConfig config_;
  VisionWeights weights_;
};

}  // namespace tern::vision
