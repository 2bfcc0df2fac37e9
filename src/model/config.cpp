#include "tern/model/config.h"

#include <cmath>
#include <string>

#include "tern/core/error.h"
#include "tern/gguf/gguf.h"
#include "tern/model/arch.h"

namespace tern {
namespace {

int positive(const gguf::GgufFile& f, const std::string& key, int64_t v, int64_t max) {
  if (v <= 0 || v > max) {
    throw FormatError(f.path() + ": metadata " + key + " = " + std::to_string(v) +
                      " is out of range (1.." + std::to_string(max) + ")");
  }
  return int(v);
}

}  // namespace

const char* to_string(Activation a) {
  switch (a) {
    case Activation::SiLU:
      return "silu";
    case Activation::GeluTanh:
      return "gelu_tanh";
  }
  return "?";
}

std::optional<Activation> parse_activation(std::string_view s) {
  if (s == "silu" || s == "swish") return Activation::SiLU;
  if (s == "gelu_tanh" || s == "gelu_pytorch_tanh") return Activation::GeluTanh;
  return std::nullopt;
}

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& f) {
  ModelConfig c;
  c.arch = f.get_string("general.architecture");
  const ArchSpec* spec = find_arch(c.arch);
  if (!spec) {
    throw FormatError(f.path() + ": unsupported architecture '" + c.arch +
                      "' (supported: " + supported_archs() + ")");
  }
  const std::string p = c.arch + ".";
  c.name = f.get_string_or("general.name", c.arch);
  c.n_layers = positive(f, p + "block_count", f.get_int(p + "block_count"), 1024);
  c.d_model = positive(f, p + "embedding_length", f.get_int(p + "embedding_length"), 1 << 16);
  c.d_ff = positive(f, p + "feed_forward_length", f.get_int(p + "feed_forward_length"), 1 << 18);
  c.n_heads = positive(f, p + "attention.head_count", f.get_int(p + "attention.head_count"), 1024);
  c.n_kv_heads = positive(f, p + "attention.head_count_kv",
                          f.get_int_or(p + "attention.head_count_kv", c.n_heads), c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0) {
    throw FormatError(f.path() + ": head_count " + std::to_string(c.n_heads) +
                      " is not a multiple of head_count_kv " + std::to_string(c.n_kv_heads));
  }
  const int64_t default_hd = c.d_model / c.n_heads;
  c.head_dim = positive(f, p + "attention.key_length",
                        f.get_int_or(p + "attention.key_length", default_hd), 4096);
  c.n_ctx_train =
      positive(f, p + "context_length", f.get_int_or(p + "context_length", 2048), 1 << 24);
  // Encoders normalise with LayerNorm, under its own key (llama.cpp's default 1e-12).
  c.norm_eps = spec->encoder ? f.get_f32_or(p + "attention.layer_norm_epsilon", 1e-12f)
                             : f.get_f32_or(p + "attention.layer_norm_rms_epsilon", 1e-5f);
  c.rope_theta = f.get_f32_or(p + "rope.freq_base", 10000.0f);
  c.rope_dims = positive(f, p + "rope.dimension_count",
                         f.get_int_or(p + "rope.dimension_count", c.head_dim), c.head_dim);
  if (c.rope_dims % 2 != 0) throw FormatError(f.path() + ": odd rope.dimension_count");
  if (!(c.norm_eps > 0.0f) || !(c.rope_theta > 0.0f)) {
    throw FormatError(f.path() + ": invalid norm epsilon or rope freq_base");
  }
  c.rope_style = spec->rope_style;
  c.act = spec->act;
  if (const std::string key = p + "feed_forward_activation"; f.has(key)) {
    const std::string name = f.get_string(key);
    const auto act = parse_activation(name);
    if (!act) {
      throw FormatError(f.path() + ": metadata " + key + " = '" + name +
                        "' is not a supported activation (silu, gelu_tanh)");
    }
    c.act = *act;
  }
  c.encoder = spec->encoder;
  c.causal = spec->causal && !spec->encoder;
  c.gated_ffn = spec->gated_ffn;
  c.position_embd = spec->position_embd;
  c.rope = spec->rope;
  c.fused_qkv = f.find_tensor("blk.0.attn_qkv.weight") != nullptr;
  // Q/K/V biases: the architecture's (qwen2) or wherever the file has them
  // (BERT), as llama.cpp loads them when present.
  c.qkv_bias = spec->qkv_bias || f.find_tensor("blk.0.attn_q.bias") != nullptr ||
               f.find_tensor("blk.0.attn_qkv.bias") != nullptr;
  c.qk_norm = spec->qk_norm;
  if (spec->scale_embeddings) c.embed_scale = std::sqrt(float(c.d_model));
  c.post_norms = spec->post_norms;
  if (spec->swa_pattern > 0) {
    c.swa_pattern = spec->swa_pattern;
    c.rope_theta_swa = spec->rope_theta_swa;
    c.sliding_window = int(f.get_int_or(p + "attention.sliding_window", 0));
    c.swa_pattern = int(f.get_int_or(p + "attention.sliding_window_pattern", c.swa_pattern));
    c.rope_theta_swa = f.get_f32_or(p + "rope.freq_base_swa", c.rope_theta_swa);
    if (c.sliding_window < 0 || c.swa_pattern < 0 || !(c.rope_theta_swa > 0.0f)) {
      throw FormatError(f.path() + ": invalid sliding_window, its pattern or rope.freq_base_swa");
    }
  }
  // Gemma 3 scales Q by query_pre_attn_scalar^-1/2: head_dim for every size
  // but 27B (62 layers), where it is d_model / n_heads (as llama.cpp does;
  // the GGUF carries no key for it).
  if (spec->name == "gemma3" && c.n_layers == 62) {
    c.attn_scale = 1.0f / std::sqrt(float(c.d_model / c.n_heads));
  }
  c.final_softcap = f.get_f32_or(p + "final_logit_softcapping", 0.0f);
  if (c.final_softcap < 0.0f) throw FormatError(f.path() + ": negative final_logit_softcapping");

  if (const int64_t pt = f.get_int_or(p + "pooling_type", 0); pt >= 1 && pt <= 4)
    c.pooling = Pooling(pt);

  const auto& embd = f.tensor("token_embd.weight");
  if (embd.dims.size() != 2 || embd.dims[0] != c.d_model) {
    throw FormatError(f.path() + ": token_embd.weight has the wrong shape for embedding_length " +
                      std::to_string(c.d_model));
  }
  c.n_vocab = int(embd.dims[1]);
  c.tied_embeddings = !c.encoder && f.find_tensor("output.weight") == nullptr;
  if (const gguf::TensorInfo* d2 = f.find_tensor("dense_2.weight")) {
    const gguf::TensorInfo* d3 = f.find_tensor("dense_3.weight");
    if (d2->dims.size() != 2 || d2->dims[0] != c.d_model || !d3 || d3->dims.size() != 2 ||
        d3->dims[0] != d2->dims[1] || d3->dims[1] != c.d_model)
      throw FormatError(
          f.path() + ": dense_2.weight / dense_3.weight have the wrong shapes (want (" +
          std::to_string(c.d_model) + ", n) and (n, " + std::to_string(c.d_model) + "))");
    c.dense_out = int(d2->dims[1]);
  }
  return c;
}

}  // namespace tern
