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
  // The BERT family: an encoder. Attention sees the whole sequence (not
  // causal), LayerNorm with bias follows each residual add (post-norm)
  // instead of an RMSNorm before each block, the summed embeddings are
  // LayerNormed (token_embd_norm), and there is no LM head: it embeds only.
  bool encoder = false;
  bool gated_ffn = true;       // false: ffn(x) = act(x Wup + b) Wdown + b (BERT)
  bool position_embd = false;  // learned absolute positions (position_embd.weight): BERT
  bool rope = true;            // false: no rotary embedding (BERT)
  // false: attention sees the whole input both ways and the model only
  // embeds (EmbeddingGemma); sliding-window layers then see a symmetric
  // window of sliding_window / 2 positions each side (llama.cpp's
  // LLAMA_SWA_TYPE_SYMMETRIC). The encoders are never causal.
  bool causal = true;
};

// Registry filled by the arch_*.cpp files; nullptr for an unknown architecture.
const ArchSpec* find_arch(std::string_view name);
std::string supported_archs();  // "llama, qwen2" for error messages

}  // namespace tern
