#pragma once
// Per-architecture facts that metadata does not carry. Adding an architecture
// means one arch_<name>.cpp file that registers its ArchSpec.
#include <string>
#include <string_view>

#include "tern/model/config.h"

namespace tern {

struct ArchSpec {
  std::string_view name;  // general.architecture value
  RopeStyle rope_style = RopeStyle::Normal;
  Activation act = Activation::SiLU;
  bool qkv_bias = false;
  bool qk_norm = false;
  bool scale_embeddings = false;  // multiply embeddings by sqrt(d_model)
  bool post_norms = false;        // RMSNorm on the attention and FFN outputs before the residual
  // Sliding-window layers: every swa_pattern-th layer (1-based) is global, the
  // others attend only the last <arch>.attention.sliding_window positions and
  // rotate with rope_theta_swa. 0 = every layer global.
  int swa_pattern = 0;
  float rope_theta_swa = 10000.0f;
};

// Registry filled by the arch_*.cpp files; nullptr for an unknown architecture.
const ArchSpec* find_arch(std::string_view name);
std::string supported_archs();  // "llama, qwen2" for error messages

}  // namespace tern
