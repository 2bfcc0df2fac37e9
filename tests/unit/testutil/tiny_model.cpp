#include "tiny_model.h"

#include <random>
#include <vector>

#include "random_blocks.h"
#include "tern/gguf/gguf.h"
#include "tern/kernels/dequant.h"
#include "tern/tokenizer/tokenizer.h"
#include "testutil.h"

namespace tern::test {
namespace {

std::vector<float> randn(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace

std::string write_tiny_model(const TinyModelSpec& s, const std::string& name) {
  std::mt19937 rng(s.seed);
  gguf::GgufWriter w;
  const std::string a = s.arch + ".";
  const int hd = s.d_model / s.n_heads, kvd = s.n_kv_heads * hd;
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", "tiny-" + s.arch);
  w.set_u32(a + "block_count", uint32_t(s.n_layers));
  w.set_u32(a + "embedding_length", uint32_t(s.d_model));
  w.set_u32(a + "feed_forward_length", uint32_t(s.d_ff));
  w.set_u32(a + "attention.head_count", uint32_t(s.n_heads));
  w.set_u32(a + "attention.head_count_kv", uint32_t(s.n_kv_heads));
  w.set_u32(a + "context_length", uint32_t(s.n_ctx));
  w.set_f32(a + "rope.freq_base", s.rope_theta);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  if (!s.activation.empty()) w.set_string(a + "feed_forward_activation", s.activation);
  if (s.with_tokenizer) {
    // Byte-level vocabulary: 3 control tokens, then single bytes.
    std::vector<std::string> toks = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    std::vector<int32_t> types = {3, 3, 3};
    for (int b = 0; int(toks.size()) < s.n_vocab && b < 256; ++b) {
      toks.push_back(byte_level_spelling(std::string(1, char(b))));
      types.push_back(1);
    }
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "smollm");
    w.set_string_array("tokenizer.ggml.tokens", toks);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", {});
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_bool("tokenizer.ggml.add_bos_token", false);
  }
  auto add = [&](const std::string& n, std::vector<int64_t> dims, float scale, DType t) {
    size_t count = 1;
    for (auto d : dims) count *= size_t(d);
    auto v = randn(rng, count, scale);
    // The lattice types (no test quantizer) get random codes of about the
    // same spread; a type tern cannot load (Q8_K, ...) is written as zero bytes
    // of the right size: enough for tests that the loader refuses it by name.
    if (tern::kernels::can_quantize(t)) {
      w.add_tensor(n, t, dims, tern::kernels::quantize_ref(t, v));
    } else if (can_write_random_blocks(t)) {
      w.add_tensor(n, t, dims, random_blocks(t, count, scale, rng));
    } else {
      w.add_tensor(n, t, dims, std::vector<uint8_t>(tern::dtype_row_bytes(t, count), 0));
    }
  };
  auto add_norm = [&](const std::string& n, int len) {
    std::vector<float> v(static_cast<size_t>(len));
    std::uniform_real_distribution<float> u(0.8f, 1.2f);
    for (auto& x : v) x = u(rng);
    w.add_tensor_f32(n, {len}, v);
  };
  add("token_embd.weight", {s.d_model, s.n_vocab}, 1.0f, s.embd_type);
  if (!s.tied) add("output.weight", {s.d_model, s.n_vocab}, 0.1f, DType::Q8_0);
  add_norm("output_norm.weight", s.d_model);
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add_norm(b + "attn_norm.weight", s.d_model);
    add_norm(b + "ffn_norm.weight", s.d_model);
    add(b + "attn_q.weight", {s.d_model, s.d_model}, 0.15f, s.weight_type);
    add(b + "attn_k.weight", {s.d_model, kvd}, 0.15f, s.weight_type);
    add(b + "attn_v.weight", {s.d_model, kvd}, 0.15f, s.weight_type);
    add(b + "attn_output.weight", {s.d_model, s.d_model}, 0.1f, s.weight_type);
    add(b + "ffn_gate.weight", {s.d_model, s.d_ff}, 0.12f, s.weight_type);
    add(b + "ffn_up.weight", {s.d_model, s.d_ff}, 0.12f, s.weight_type);
    add(b + "ffn_down.weight", {s.d_ff, s.d_model}, 0.1f, s.weight_type);
    if (s.arch == "qwen2") {
      add(b + "attn_q.bias", {s.d_model}, 0.1f, DType::F32);
      add(b + "attn_k.bias", {kvd}, 0.1f, DType::F32);
      add(b + "attn_v.bias", {kvd}, 0.1f, DType::F32);
    }
  }
  const std::string path = temp_path(name);
  w.write(path);
  return path;
}

}  // namespace tern::test
