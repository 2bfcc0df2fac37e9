// The architecture oracle's test models: one table entry per case, every
// difference between architectures a field of it.
#include "tern/model/gen_arch.h"

#include <cmath>
#include <cstring>
#include <numbers>

#include "gen_encoder.h"
#include "gen_tensors.h"
#include "tern/core/error.h"
#include "tern/core/sha256.h"
#include "tern/gguf/gguf.h"
#include "tern/kernels/dequant.h"

namespace tern {
namespace {

struct GenCase {
  const char* name;  // the generator's case
  const char* arch;  // general.architecture
  int n_layers, d_model, n_heads, n_kv_heads;
  int head_dim;  // written as attention.key_length when not d_model / n_heads
  int d_ff;
  float rope_theta, norm_eps;
  bool qkv_bias = false;    // qwen2
  bool qk_norm = false;     // qwen3, gemma3
  bool post_norms = false;  // gemma3
  int sliding_window = 0;   // gemma3: every 6th layer global
  bool tied = true;
  // Llama 3.x RoPE scaling (factor 8, low 1, high 4) over this original
  // context, stored as the rope_freqs tensor as llama.cpp's converter does.
  // Small here so that the scaled frequencies matter at short prompts.
  int llama3_orig_ctx = 0;
  // An embedding model (EmbeddingGemma): pooling_type mean and the dense
  // projections of the pooled vector (dense_2: 2 x d_model outputs, dense_3
  // back to d_model), as llama.cpp's converter writes them.
  bool embedding = false;
  // A Qwen3-Reranker as llama.cpp's converter writes one: pooling_type 4
  // (rank), classifier.output_labels ["yes", "no"], cls.output.weight
  // (d_model, 2) the LM head's rows of those two tokens (random here), no
  // output.weight, and the rerank prompt as tokenizer.chat_template.rerank.
  bool rank = false;
};

// The converter's rerank prompt for Qwen3-Reranker (conversion/qwen.py).
constexpr const char* kQwen3RerankTemplate =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query "
    "and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that "
    "answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n";

// name, arch, layers, d_model, heads, kv heads, head_dim, d_ff, rope theta,
// norm eps, qkv_bias, qk_norm, post_norms, sliding_window, tied, llama3 ctx.
constexpr GenCase kCases[] = {
    {"llama", "llama", 2, 128, 4, 2, 32, 256, 10000.0f, 1e-5f, false, false, false, 0, false, 0},
    {"llama3", "llama", 2, 128, 4, 2, 32, 256, 500000.0f, 1e-5f, false, false, false, 0, true, 64},
    {"qwen2", "qwen2", 2, 128, 4, 2, 32, 256, 1e6f, 1e-6f, true, false, false, 0, true, 0},
    {"qwen3", "qwen3", 2, 128, 4, 2, 64, 256, 1e6f, 1e-6f, false, true, false, 0, false, 0},
    {"gemma3", "gemma3", 6, 128, 4, 1, 64, 256, 1e6f, 1e-6f, false, true, true, 8, true, 0},
    {"gemma-embedding", "gemma-embedding", 6, 128, 4, 1, 64, 256, 1e6f, 1e-6f, false, true, true, 8,
     true, 0, true},
    // A decoder reranker (the rerank oracle's case, not the logits oracle's).
    {"qwen3-reranker", "qwen3", 2, 128, 4, 2, 64, 256, 1e6f, 1e-6f, false, true, false, 0, true, 0,
     false, true},
    // Real shapes, for benchmarks (decode against the DRAM bound): SmolLM2's
    // 360M and 1.7B configurations.
    {"smollm2-360m", "llama", 32, 960, 15, 5, 64, 2560, 100000.0f, 1e-5f, false, false, false, 0,
     true, 0},
    {"smollm2-1.7b", "llama", 24, 2048, 32, 32, 64, 8192, 130000.0f, 1e-5f, false, false, false, 0,
     true, 0},
};

const GenCase& find_case(const std::string& name) {
  for (const GenCase& c : kCases) {
    if (name == c.name) return c;
  }
  std::string all;
  for (const auto& n : gen_arch_cases(true)) all += (all.empty() ? "" : ", ") + n;
  for (const auto& n : gen_encoder_cases()) all += ", " + n;
  throw InvalidArgument("unknown architecture case '" + name + "' (known: " + all + ")");
}

// Llama 3's per-frequency divisors (HF's _compute_llama3_parameters).
std::vector<float> llama3_rope_freqs(int head_dim, float theta, int orig_ctx) {
  const double factor = 8, low = 1, high = 4;
  const double low_wavelen = orig_ctx / low, high_wavelen = orig_ctx / high;
  std::vector<float> out(size_t(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i) {
    const double freq = std::pow(double(theta), -2.0 * i / head_dim);
    const double wavelen = 2 * std::numbers::pi / freq;
    double div = 1;
    if (wavelen > low_wavelen) {
      div = factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (orig_ctx / wavelen - low) / (high - low);
      div = 1 / ((1 - smooth) / factor + smooth);
    }
    out[size_t(i)] = float(div);
  }
  return out;
}

}  // namespace

float SeededNormal::next() {
  if (have_spare_) {
    have_spare_ = false;
    return float(spare_);
  }
  // Two uniforms in (0, 1] from 53 random bits each.
  const double u1 = (double(next_u64() >> 11) + 1.0) * 0x1p-53;
  const double u2 = double(next_u64() >> 11) * 0x1p-53;
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2 * std::numbers::pi * u2);
  have_spare_ = true;
  return float(r * std::cos(2 * std::numbers::pi * u2));
}

std::vector<float> SeededNormal::fill(size_t n, float scale) {
  std::vector<float> v(n);
  for (float& x : v) x = next() * scale;
  return v;
}

uint64_t SeededNormal::next_u64() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<std::string> gen_arch_cases(bool with_benchmark_shapes) {
  std::vector<std::string> v;
  for (const GenCase& c : kCases) {
    const bool bench = std::string_view(c.name).starts_with("smollm2-");
    if (!c.embedding && ((!bench && !c.rank) || with_benchmark_shapes)) v.push_back(c.name);
  }
  if (with_benchmark_shapes)
    for (const std::string& r : encoder_cases(/*rankers=*/true)) v.push_back(r);
  return v;
}

bool gen_arch_own_vocab(const std::string& arch_case) {
  return is_encoder_case(arch_case);
}

std::vector<std::string> gen_encoder_cases() {
  std::vector<std::string> v = encoder_cases(/*rankers=*/false);
  for (const GenCase& c : kCases)
    if (c.embedding) v.push_back(c.name);
  return v;
}

void copy_keys(const gguf::GgufFile& src, gguf::GgufWriter& w, std::string_view prefix) {
  using gguf::ValueType;
  for (const std::string& key : src.keys()) {
    if (!key.starts_with(prefix) || key == "general.alignment") continue;
    const gguf::MetaValue& v = src.value(key);
    switch (v.type) {
      case ValueType::STRING:
        w.set_string(key, std::string(v.str));
        break;
      case ValueType::BOOL:
        w.set_bool(key, v.bits != 0);
        break;
      case ValueType::U8:
      case ValueType::U16:
      case ValueType::U32:
        w.set_u32(key, uint32_t(v.bits));
        break;
      case ValueType::I8:
      case ValueType::I16:
      case ValueType::I32:
        w.set_i32(key, int32_t(v.bits));
        break;
      case ValueType::F32:
      case ValueType::F64:
        w.set_f32(key, src.get_f32(key));
        break;
      case ValueType::ARRAY:
        if (v.elem_type == ValueType::STRING) {
          w.set_string_array(key, src.get_string_array(key));
        } else if (v.elem_type == ValueType::F32 || v.elem_type == ValueType::F64) {
          w.set_f32_array(key, src.get_f32_array(key));
        } else {
          w.set_i32_array(key, src.get_i32_array(key));
        }
        break;
      default:
        throw FormatError(src.path() + ": cannot copy key " + key);
    }
  }
}

GenArchResult generate_arch_model(const std::string& arch_case, uint64_t seed,
                                  const gguf::GgufFile* tokenizer, DType weight_type) {
  if (is_encoder_case(arch_case)) return generate_encoder_model(arch_case, seed, weight_type);
  const GenCase& c = find_case(arch_case);
  GenArchResult res;
  gguf::GgufWriter& w = res.writer;
  GenTensors gen(w, seed);
  SeededNormal& rng = gen.rng();
  const std::string a = std::string(c.arch) + ".";
  const int d = c.d_model, hd = c.head_dim, qd = c.n_heads * hd, kvd = c.n_kv_heads * hd;

  w.set_string("general.architecture", c.arch);
  w.set_string("general.name", std::string("tern-gen-") + c.name);
  w.set_u32(a + "block_count", uint32_t(c.n_layers));
  w.set_u32(a + "context_length", 256);
  w.set_u32(a + "embedding_length", uint32_t(d));
  w.set_u32(a + "feed_forward_length", uint32_t(c.d_ff));
  w.set_u32(a + "attention.head_count", uint32_t(c.n_heads));
  w.set_u32(a + "attention.head_count_kv", uint32_t(c.n_kv_heads));
  if (hd != d / c.n_heads) {
    w.set_u32(a + "attention.key_length", uint32_t(hd));
    w.set_u32(a + "attention.value_length", uint32_t(hd));
  }
  w.set_u32(a + "rope.dimension_count", uint32_t(hd));
  w.set_f32(a + "rope.freq_base", c.rope_theta);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", c.norm_eps);
  if (c.sliding_window > 0) w.set_u32(a + "attention.sliding_window", uint32_t(c.sliding_window));
  if (c.embedding) {
    w.set_u32(a + "pooling_type", 1);  // mean
    w.set_u32(a + "dense_2_feat_in", uint32_t(d));
    w.set_u32(a + "dense_2_feat_out", uint32_t(2 * d));
    w.set_u32(a + "dense_3_feat_in", uint32_t(2 * d));
    w.set_u32(a + "dense_3_feat_out", uint32_t(d));
  }
  if (tokenizer) {
    const size_t n = tokenizer->array_length("tokenizer.ggml.tokens");
    if (n != size_t(kGenArchVocab)) {
      throw InvalidArgument(tokenizer->path() + ": tokenizer has " + std::to_string(n) +
                            " tokens, the generator needs " + std::to_string(kGenArchVocab));
    }
    copy_keys(*tokenizer, w, "tokenizer.");
  }
  if (c.rank) {
    w.set_u32(a + "pooling_type", 4);
    w.set_string_array(a + "classifier.output_labels", {"yes", "no"});
    w.set_string("tokenizer.chat_template.rerank", kQwen3RerankTemplate);
  }

  // Linear weights and embeddings in Q8_0 (both engines read them exactly);
  // norms and biases in F32. Scales keep activations near unit size.
  auto add = [&](const std::string& name, std::vector<int64_t> dims, std::vector<float> v,
                 DType type) { gen.add(name, std::move(dims), v, type); };
  auto matrix = [&](const std::string& name, int n_out, int n_in, float gain) {
    gen.matrix(name, n_out, n_in, gain, weight_type);
  };
  auto norm = [&](const std::string& name, int n) {
    auto v = rng.fill(size_t(n), 0.1f);
    for (float& x : v) x += 1.0f;
    add(name, {n}, std::move(v), DType::F32);
  };
  auto bias = [&](const std::string& name, int n) {
    add(name, {n}, rng.fill(size_t(n), 0.2f), DType::F32);
  };

  // Gemma multiplies embeddings by sqrt(d_model): unit-size rows after that.
  const float embd_scale = c.post_norms ? 1.0f / std::sqrt(float(d)) : 0.25f;
  add("token_embd.weight", {d, kGenArchVocab}, rng.fill(size_t(d) * kGenArchVocab, embd_scale),
      DType::Q8_0);
  norm("output_norm.weight", d);
  if (!c.tied) matrix("output.weight", kGenArchVocab, d, 2.0f);
  if (c.llama3_orig_ctx > 0) {
    add("rope_freqs.weight", {hd / 2}, llama3_rope_freqs(hd, c.rope_theta, c.llama3_orig_ctx),
        DType::F32);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    norm(b + "attn_norm.weight", d);
    matrix(b + "attn_q.weight", qd, d, 1.0f);
    matrix(b + "attn_k.weight", kvd, d, 1.0f);
    matrix(b + "attn_v.weight", kvd, d, 1.0f);
    if (c.qkv_bias) {
      bias(b + "attn_q.bias", qd);
      bias(b + "attn_k.bias", kvd);
      bias(b + "attn_v.bias", kvd);
    }
    if (c.qk_norm) {
      norm(b + "attn_q_norm.weight", hd);
      norm(b + "attn_k_norm.weight", hd);
    }
    matrix(b + "attn_output.weight", d, qd, 0.5f);
    if (c.post_norms) norm(b + "post_attention_norm.weight", d);
    norm(b + "ffn_norm.weight", d);
    matrix(b + "ffn_gate.weight", c.d_ff, d, 1.0f);
    matrix(b + "ffn_up.weight", c.d_ff, d, 1.0f);
    matrix(b + "ffn_down.weight", d, c.d_ff, 0.5f);
    if (c.post_norms) norm(b + "post_ffw_norm.weight", d);
  }
  if (c.embedding) {
    matrix("dense_2.weight", 2 * d, d, 1.0f);
    matrix("dense_3.weight", d, 2 * d, 1.0f);
  }
  // F32, so that neither engine rounds the head (llama.cpp would quantize
  // the pooled row to q8_0 against a Q8_0 head).
  if (c.rank)
    add("cls.output.weight", {d, 2}, rng.fill(size_t(2) * d, 1.0f / std::sqrt(float(d))),
        DType::F32);
  res.weights_sha256 = gen.sha256();
  return res;
}

}  // namespace tern
