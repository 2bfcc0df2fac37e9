#pragma once
// Small generated GGUF models for unit tests: random weights of any shape,
// written with the project's own GgufWriter.
#include <cstdint>
#include <string>

#include "tern/core/dtype.h"

namespace tern::test {

struct TinyModelSpec {
  std::string arch = "llama";  // "llama" or "qwen2" (adds QKV biases)
  int n_layers = 2;
  int d_model = 64;
  int n_heads = 4;
  int n_kv_heads = 2;
  int d_ff = 96;
  int n_vocab = 80;
  int n_ctx = 256;
  float rope_theta = 10000.0f;
  DType weight_type = DType::Q4_1;
  DType embd_type = DType::Q8_0;
  bool tied = true;
  bool with_tokenizer = true;  // byte-level gpt2 vocab of n_vocab tokens
  std::string activation;      // written as <arch>.feed_forward_activation unless empty
  uint32_t seed = 1;
};

// Writes the model to a fresh temp file and returns its path.
std::string write_tiny_model(const TinyModelSpec& spec, const std::string& name);

}  // namespace tern::test
