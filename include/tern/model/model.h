#pragma once
// A decoder-only transformer loaded from GGUF: weights repacked into the
// engine's int4/int8 tiles, the embedding table left in the memory-mapped
// file, and the forward pass over a batch of sequences.
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "tern/core/aligned.h"
#include "tern/gguf/gguf.h"
#include "tern/kernels/packed.h"
#include "tern/model/attention_plan.h"
#include "tern/model/batch.h"
#include "tern/model/config.h"
#include "tern/model/rank_head.h"

namespace tern {

class TaskPool;
namespace kv {
class PagedKv;
}

struct LoadOptions {
  // Force a packed format for every linear weight (default: per-tensor policy).
  std::optional<kernels::WeightFormat> force_format;
  // Format for the output head (the policy prefers int8).
  kernels::WeightFormat head_format = kernels::WeightFormat::Int8Sym;
};

struct LayerWeights {
  std::vector<float> attn_norm;                // (d_model)
  kernels::PackedMatrix wq, wk, wv, wo;        // (q_dim, d), (kv_dim, d), (kv_dim, d), (d, q_dim)
  std::vector<float> bq, bk, bv;               // qkv_bias: (q_dim), (kv_dim), (kv_dim)
  std::vector<float> q_norm, k_norm;           // qk_norm: (head_dim)
  std::vector<float> post_attn_norm;           // post_norms: (d_model)
  std::vector<float> ffn_norm;                 // (d_model)
  std::vector<float> post_ffn_norm;            // post_norms: (d_model)
  kernels::PackedMatrix w_gate, w_up, w_down;  // (d_ff, d), (d_ff, d), (d, d_ff)
};

// Scratch buffers for one forward pass, grown (never shrunk) to the largest
// batch seen, so steady-state decode allocates nothing.
struct Workspace {
  int capacity = 0;               // tokens
  AlignedBuffer<float> x, xn;     // (T, d_model)
  AlignedBuffer<float> q, k, v;   // (T, q_dim), (T, kv_dim), (T, kv_dim)
  AlignedBuffer<float> attn;      // (T, q_dim)
  AlignedBuffer<float> gate, up;  // (T, d_ff)
  AlignedBuffer<float> tmp;       // (T, max(d_model, d_ff))
  kernels::QuantizedActs qa;
  std::vector<int> tok_entry, tok_pos;  // (T) which entry, which position
  std::vector<SeqId> seqs;              // the batch's sequences
  AttentionPlan attn_plan;              // the attention tasks of a layer (attention_plan.h)
  std::vector<LoraRows> lora_rows;      // the entries that run an adapter (lora_linear)
  LoraStep lora;                        // its scratch
  void ensure(const ModelConfig& c, int tokens);
};

class Model {
 public:
  // Reads config and repacks weights (progress reported via the callback, 0..1).
  static std::unique_ptr<Model> load(std::shared_ptr<const gguf::GgufFile> file,
                                     const LoadOptions& opts, TaskPool& pool,
                                     const std::function<void(float)>& progress = {});

  const ModelConfig& config() const { return cfg_; }
  const gguf::GgufFile& file() const { return *file_; }
  size_t packed_bytes() const;  // resident bytes of repacked weights
  // The reranker's classification head (cls.output.weight, ...); null when
  // the file has none.
  const RankHead* rank_head() const { return rank_head_ ? &*rank_head_ : nullptr; }

  // One forward pass: appends each entry's tokens to its KV (reserving room
  // first, committing after) and writes the requested logits into out
  // (resized here). A sequence whose flash reads failed during the pass has
  // kv.failure(seq) set and garbage logits: the caller must check.
  void forward(const Batch& batch, kv::PagedKv& kv, StepOutput& out, TaskPool& pool);

 private:
  Model() = default;
  void embed(const Batch& batch, float* x) const;
  void attention_block(int layer, const Batch& batch, kv::PagedKv& kv, TaskPool& pool);
  void ffn_block(int layer, const Batch& batch, TaskPool& pool);
  // x (T, d) += post_norm ? rmsnorm(y) * post_norm : y
  void residual_add(const std::vector<float>& post_norm, float* y, int T, TaskPool& pool);
  void logits(const Batch& batch, StepOutput& out, TaskPool& pool);
  // When an entry runs an adapter: y_i = x W_i^T for every output, x being
  // the layer's quantized input (ws_.qa), with each entry's adapter term on
  // its rows; true then. False (nothing done) when no entry has an adapter:
  // the caller runs the plain matmul.
  bool lora_linear(int layer, const Batch& batch, std::initializer_list<LoraLinear> outs,
                   TaskPool& pool);

  ModelConfig cfg_;
  std::shared_ptr<const gguf::GgufFile> file_;
  const gguf::TensorInfo* embd_ = nullptr;  // (n_vocab, d_model) rows, stays in the mmap
  kernels::WeightArena weights_;  // the packed matrices' bytes (outlives layers_ and head_)
  std::vector<LayerWeights> layers_;
  std::vector<float> out_norm_;    // (d_model)
  std::vector<float> rope_freqs_;  // (rope_dims/2) or empty
  kernels::PackedMatrix head_;     // (n_vocab, d_model)
  std::optional<RankHead> rank_head_;
  Workspace ws_;
};

}  // namespace tern
