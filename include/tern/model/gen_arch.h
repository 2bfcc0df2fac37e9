#pragma once
// Seeded random-weight GGUF files of each supported architecture, with the
// real tensor names and metadata at small shapes: the architecture oracle's
// test models (tern gen-arch-model writes them for llama.cpp; the oracle
// test regenerates them in memory from the same seed). Adding an
// architecture means one entry in gen_arch.cpp's table.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/gguf/gguf_writer.h"
#include "tern/model/lora.h"

namespace tern {

namespace gguf {
class GgufFile;
}

// The generator's vocabulary size: SmolLM2's tokenizer, which the files
// carry (copied) so llama.cpp can load them.
constexpr int kGenArchVocab = 49152;

struct GenArchResult {
  gguf::GgufWriter writer;
  // SHA-256 (hex) over every tensor's name, type, dims and bytes in file
  // order: what the logits depend on, whether or not a tokenizer was copied.
  std::string weights_sha256;
};

// The generator's cases: "llama", "llama3", "qwen2", "qwen3", "gemma3" (small
// shapes, for the oracle), "smollm2-360m" and "smollm2-1.7b" (real shapes,
// for benchmarks) and "qwen3-reranker" (the rerank oracle's: qwen3 with a
// classification head), the last three listed only when asked for: the
// logits oracle's.
std::vector<std::string> gen_arch_cases(bool with_benchmark_shapes = false);
// The embedding-model cases (the embeddings oracle's): "bert" and
// "nomic-bert", encoders with a WordPiece vocabulary of their own, and
// "gemma-embedding" (EmbeddingGemma: bidirectional Gemma 3, mean pooling,
// dense heads; the tokenizer argument's vocabulary, like the decoders).
std::vector<std::string> gen_encoder_cases();
// Whether the case writes its own vocabulary (the encoders): the tokenizer
// argument of generate_arch_model is then ignored and may be null.
bool gen_arch_own_vocab(const std::string& arch_case);

// Builds the file for `arch_case` from `seed` (the same bytes on every host:
// the random numbers come from splitmix64, not <random>). tokenizer: a GGUF
// whose tokenizer.* keys are copied (it must have kGenArchVocab tokens), or
// nullptr for a weights-only file. Throws InvalidArgument on an unknown case
// or a tokenizer of another size.
// weight_type: the linear layers' (and untied head's) GGUF type, Q8_0 by
// default (both engines read it exactly); Q4_0 / Q4_1 for bandwidth benchmarks.
GenArchResult generate_arch_model(const std::string& arch_case, uint64_t seed,
                                  const gguf::GgufFile* tokenizer, DType weight_type = DType::Q8_0);

// Copies every key of src that starts with `prefix` into w (scalars, strings
// and arrays; integers as u32 / i32).
void copy_keys(const gguf::GgufFile& src, gguf::GgufWriter& w, std::string_view prefix);

struct GenLoraOptions {
  int rank = 16;
  uint64_t seed = 1;
  float alpha = 0;         // adapter.lora.alpha; 0: 2 * rank (scale 2)
  float strength = 0.15f;  // RMS of the low-rank term relative to the base layer's output
  std::vector<LoraSlot> slots = {LoraSlot::Q,    LoraSlot::K,  LoraSlot::V,   LoraSlot::O,
                                 LoraSlot::Gate, LoraSlot::Up, LoraSlot::Down};
};

// A random LoRA adapter for every layer of `base` on o.slots, in llama.cpp's
// adapter format (F32 A and B). weights_sha256 covers A and B.
GenArchResult generate_lora(const gguf::GgufFile& base, const GenLoraOptions& o);

// Deterministic N(0, 1) samples from a 64-bit seed (splitmix64 + Box-Muller).
class SeededNormal {
 public:
  explicit SeededNormal(uint64_t seed) : state_(seed) {}
  float next();
  std::vector<float> fill(size_t n, float scale);

 private:
  uint64_t next_u64();
  uint64_t state_;
  bool have_spare_ = false;
  double spare_ = 0;
};

}  // namespace tern
