#pragma once
// Architecture hyper-parameters read from GGUF metadata. Differences between
// architectures are data here (flags, norms, activation), not branches spread
// through the forward pass.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tern/model/pooling.h"

namespace tern {

namespace gguf {
class GgufFile;
}

enum class RopeStyle : uint8_t { Normal, NeoX };  // Normal: adjacent pairs; NeoX: halves
// The gated FFN's activation: SiLU gives SwiGLU (llama, qwen), GeluTanh
// gives GeGLU (gemma): ffn(x) = (act(x Wgate) * (x Wup)) Wdown.
enum class Activation : uint8_t { SiLU, GeluTanh };

// "silu", "gelu_tanh".
const char* to_string(Activation a);
// Also accepts HF's hidden_act spellings ("swish", "gelu_pytorch_tanh");
// nullopt for anything else.
std::optional<Activation> parse_activation(std::string_view s);

struct RopeScaling {
  // Llama-3 style frequency scaling; factor 1 = off.
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_context = 8192;
};

struct ModelConfig {
  std::string arch;  // "llama", "qwen2", ...
  std::string name;
  int n_layers = 0;
  int d_model = 0;  // embedding length
  int d_ff = 0;     // feed-forward length
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // d_model / n_heads unless given
  int n_vocab = 0;
  int n_ctx_train = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int rope_dims = 0;  // rotated dims per head (<= head_dim)
  RopeStyle rope_style = RopeStyle::Normal;
  RopeScaling rope_scaling;
  Activation act = Activation::SiLU;  // the architecture's, or <arch>.feed_forward_activation
  bool qkv_bias = false;              // qwen2
  bool qk_norm = false;               // qwen3
  bool tied_embeddings = false;
  float embed_scale = 1.0f;  // gemma multiplies embeddings by sqrt(d_model)
  bool post_norms = false;   // gemma: post_attention_norm and post_ffw_norm
  // Sliding-window attention (gemma3): layer l is local unless
  // (l + 1) % swa_pattern == 0; a local layer's token at position p attends
  // positions (p - sliding_window, p] and rotates with rope_theta_swa.
  int sliding_window = 0;  // 0: no local layers
  int swa_pattern = 0;
  float rope_theta_swa = 10000.0f;
  float attn_scale = 0.0f;     // Q scale before Q.K; 0: 1/sqrt(head_dim)
  float final_softcap = 0.0f;  // logits = c * tanh(logits / c) when > 0
  // <arch>.pooling_type when it names one tern serves (1 mean, 2 cls,
  // 3 last, 4 rank; Model::load turns rank without a classification head
  // into None); None when the file names none: embeddings then use the
  // server's default.
  Pooling pooling = Pooling::None;
  // Encoders (arch.h): bidirectional attention, post-LayerNorm, no LM head.
  bool encoder = false;
  bool gated_ffn = true;       // false: act(x Wup + b_up) Wdown + b_down
  bool position_embd = false;  // position_embd.weight rows added to the embeddings
  bool rope = true;
  bool fused_qkv = false;  // blk.N.attn_qkv.weight holds Q, K and V (split at load)
  // false: attention over the whole input both ways (the encoders,
  // EmbeddingGemma); such a model only embeds, its input in one step.
  bool causal = true;
  // Dense projections of the pooled vector (EmbeddingGemma's
  // sentence-transformers heads: dense_2.weight (dense_out, d_model), then
  // dense_3.weight (d_model, dense_out)); 0: none.
  int dense_out = 0;

  // Whether the model can generate text (has an LM head); false for the
  // models that only embed.
  bool generates() const { return !encoder && causal; }

  bool is_local_layer(int l) const {
    return sliding_window > 0 && swa_pattern > 0 && (l + 1) % swa_pattern != 0;
  }
  // A local layer's window (see sliding_window); a non-causal model's is
  // symmetric: sliding_window / 2 positions each side, as the window plus
  // the token itself (paged_kv.h's attend with a horizon).
  int layer_window(int l) const {
    if (!is_local_layer(l)) return 0;
    return causal ? sliding_window : sliding_window / 2 + 1;
  }
  float layer_rope_theta(int l) const { return is_local_layer(l) ? rope_theta_swa : rope_theta; }
  float q_scale() const {
    return attn_scale > 0.0f ? attn_scale : 1.0f / std::sqrt(float(head_dim));
  }

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }

  // Reads <arch>.* keys; throws FormatError naming the file and key on bad values.
  // The activation comes from the architecture table; the optional key
  // <arch>.feed_forward_activation (a tern key, not llama.cpp's: test models
  // and conversions that keep HF's hidden_act) overrides it, and an unknown
  // value is a load error.
  static ModelConfig from_gguf(const gguf::GgufFile& f);
};

}  // namespace tern
