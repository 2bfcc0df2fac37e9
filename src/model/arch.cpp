// The table of supported architectures. Each entry is data: the forward pass
// reads the flags, it never switches on the name.
#include "tern/model/arch.h"

#include <array>

namespace tern {
namespace {

// Llama 1/2/3, SmolLM, TinyLlama, Mistral: RMSNorm, adjacent-pair RoPE, SwiGLU.
constexpr ArchSpec kLlama{"llama", RopeStyle::Normal, Activation::SiLU, false, false, false};
// Qwen2 / Qwen2.5: like llama with biases on Q, K, V and NeoX-style RoPE.
constexpr ArchSpec kQwen2{"qwen2", RopeStyle::NeoX, Activation::SiLU, true, false, false};
// Qwen3: NeoX RoPE, no QKV bias, RMSNorm on Q and K per head.
constexpr ArchSpec kQwen3{"qwen3", RopeStyle::NeoX, Activation::SiLU, false, true, false};

// Gemma 3 (text): NeoX RoPE, QK-norm, GeGLU, embeddings scaled by
// sqrt(d_model), RMSNorm before and after attention and FFN, five local
// (sliding-window, RoPE base 10000) layers for each global one. llama.cpp's
// converter stores Gemma's norm weights with the +1 already added, so they
// are plain RMSNorm weights here.
constexpr ArchSpec kGemma3{.name = "gemma3",
                           .rope_style = RopeStyle::NeoX,
                           .act = Activation::GeluTanh,
                           .qk_norm = true,
                           .scale_embeddings = true,
                           .post_norms = true,
                           .swa_pattern = 6,
                           .rope_theta_swa = 10000.0f};

// BERT (bge, all-MiniLM, e5): absolute position and token-type (type 0)
// embeddings, Q/K/V and output biases, post-LayerNorm, an ungated GELU FFN
// with biases, attention over the whole sequence. Embeddings only.
constexpr ArchSpec kBert{.name = "bert",
                         .act = Activation::GeluTanh,
                         .encoder = true,
                         .gated_ffn = false,
                         .position_embd = true,
                         .rope = false};
// nomic-bert (nomic-embed-text): BERT's post-norm encoder with NeoX RoPE
// instead of position embeddings, a fused QKV and a SwiGLU FFN, no biases.
constexpr ArchSpec kNomicBert{
    .name = "nomic-bert", .rope_style = RopeStyle::NeoX, .act = Activation::SiLU, .encoder = true};

// EmbeddingGemma: Gemma 3 with attention over the whole input (the local
// layers' window symmetric), mean pooling from the file, and optional dense
// projections of the pooled vector (dense_2, dense_3). Embeddings only.
constexpr ArchSpec kGemmaEmbedding = [] {
  ArchSpec a = kGemma3;
  a.name = "gemma-embedding";
  a.causal = false;
  return a;
}();

constexpr std::array kArchs{&kLlama,          &kQwen2, &kQwen3,    &kGemma3,
                            &kGemmaEmbedding, &kBert,  &kNomicBert};

}  // namespace

const ArchSpec* find_arch(std::string_view name) {
  for (const ArchSpec* a : kArchs) {
    if (a->name == name) return a;
  }
  return nullptr;
}

std::string supported_archs() {
  std::string s;
  for (const ArchSpec* a : kArchs) {
    if (!s.empty()) s += ", ";
    s += a->name;
  }
  return s;
}

}  // namespace tern
