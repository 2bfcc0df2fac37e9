#pragma once
// A decoder-only transformer loaded from GGUF: weights repacked into the
// engine's tiles (packed.h), the embedding table left in the memory-mapped
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
  // Float tiles (F16 or Bf16) for the float sources (F16, BF16 and F32
  // tensors, the output head included), as kernels::float_format_for picks
  // them; quantized sources keep their default format. force_format wins.
  std::optional<kernels::WeightFormat> float_format;
  // Format for the output head (the policy prefers int8).
  kernels::WeightFormat head_format = kernels::WeightFormat::Int8Sym;
};

struct LayerWeights {
  std::vector<float> attn_norm;          // (d_model)
  kernels::PackedMatrix wq, wk, wv, wo;  // (q_dim, d), (kv_dim, d), (kv_dim, d), (d, q_dim)
  std::vector<float> bq, bk, bv;         // qkv_bias: (q_dim), (kv_dim), (kv_dim)
  std::vector<float> q_norm, k_norm;     // qk_norm: (head_dim)
  std::vector<float> post_attn_norm;     // post_norms: (d_model)
  std::vector<float> ffn_norm;           // (d_model)
  std::vector<float> post_ffn_norm;      // post_norms: (d_model)
  kernels::PackedMatrix w_gate, w_up,
      w_down;  // (d_ff, d), (d_ff, d), (d, d_ff); no gate: !gated_ffn
  // Optional biases (present in the file: BERT) and the encoders' post-LayerNorms.
  std::vector<float> bo, b_up, b_down;                  // (d_model), (d_ff), (d_model)
  std::vector<float> attn_out_norm, attn_out_norm_b;    // encoder: after attention's residual
  std::vector<float> layer_out_norm, layer_out_norm_b;  // encoder: after the FFN's residual
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
  //
  // With yield, the pass may pause between two blocks so that other passes
  // run first: a layer is its attention, in one or more parts (more for a
  // long pass at depth: attention_parts), then its FFN, n_blocks in all;
  // after each block but the last, when the KV can suspend its step
  // (kv::PagedKv::can_suspend), (*yield)(block, n_blocks) is asked; true pauses the
  // pass: forward() returns false, the KV's step is suspended and
  // the pass's activations are set aside. Other passes (over other
  // sequences, without yield) may run meanwhile; resume() with the same
  // batch and out finishes it (or pauses it again: false). The result is the
  // same bits as an uninterrupted pass. True: done.
  using YieldCheck = std::function<bool(int block, int n_blocks)>;
  bool forward(const Batch& batch, kv::PagedKv& kv, StepOutput& out, TaskPool& pool,
               const YieldCheck* yield = nullptr);
  bool resume(const Batch& batch, kv::PagedKv& kv, StepOutput& out, TaskPool& pool,
              const YieldCheck* yield = nullptr);
  bool paused() const { return paused_; }

  // An embedding's pooled vector (d_model) through the file's dense
  // projections (dense_3 . dense_2 . v, EmbeddingGemma's), as llama.cpp
  // applies them before normalising; v itself when the file has none.
  std::vector<float> project_pooled(std::vector<float> v) const;

 private:
  Model() = default;
  void embed(const Batch& batch, float* x) const;
  void encoder_inputs(int T, TaskPool& pool);  // type and position rows, LayerNorm
  // A layer's attention: attention_in (q, k, v, RoPE, the KV written, the
  // plan), ws_.attn_plan's parts, attention_out (Wo, the residual).
  void attention_in(int layer, const Batch& batch, kv::PagedKv& kv, TaskPool& pool);
  void attention_out(int layer, const Batch& batch, TaskPool& pool);
  int attention_parts(int T) const;  // a yielding pass's parts a layer (ws_.tok_pos set)
  void ffn_block(int layer, const Batch& batch, TaskPool& pool);
  // x (T, d) += post_norm ? rmsnorm(y + bias) * post_norm : y + bias (bias
  // may be empty); then, for an encoder, x = layernorm(x) * ln_w + ln_b.
  void residual_add(const std::vector<float>& post_norm, const std::vector<float>& bias, float* y,
                    int T, TaskPool& pool, const std::vector<float>& ln_w = {},
                    const std::vector<float>& ln_b = {});
  // xn (T, d) = rmsnorm(x) * w, what a decoder block reads; an encoder's
  // block reads x itself. Returns the rows to quantize.
  const float* block_input(const std::vector<float>& w, int T, TaskPool& pool);
  void logits(const Batch& batch, StepOutput& out, TaskPool& pool);
  bool run_layers(const Batch& batch, kv::PagedKv& kv, StepOutput& out, TaskPool& pool, int first,
                  int parts, const YieldCheck* yield);
  // When an entry runs an adapter: y_i = x W_i^T for every output, x being
  // the layer's quantized input (ws_.qa), with each entry's adapter term on
  // its rows; true then. False (nothing done) when no entry has an adapter:
  // the caller runs the plain matmul.
  bool lora_linear(int layer, const Batch& batch, std::initializer_list<LoraLinear> outs,
                   TaskPool& pool);

  ModelConfig cfg_;
  std::shared_ptr<const gguf::GgufFile> file_;
  const gguf::TensorInfo* embd_ = nullptr;      // (n_vocab, d_model) rows, stays in the mmap
  const gguf::TensorInfo* pos_embd_ = nullptr;  // position_embd: (n_ctx_train, d_model) rows
  std::vector<float> type_row_;                 // token_types row 0 (d_model), or empty
  std::vector<float> embd_norm_, embd_norm_b_;  // encoder: token_embd_norm (d_model)
  kernels::WeightArena weights_;  // the packed matrices' bytes (outlives layers_ and head_)
  std::vector<LayerWeights> layers_;
  std::vector<float> out_norm_;    // (d_model)
  std::vector<float> dense_2_;     // (dense_out, d_model) rows, or empty
  std::vector<float> dense_3_;     // (d_model, dense_out) rows, or empty
  std::vector<float> rope_freqs_;  // (rope_dims/2) or empty
  kernels::PackedMatrix head_;     // (n_vocab, d_model); none for a model that only embeds
  std::optional<RankHead> rank_head_;
  Workspace ws_;
  // A paused pass's activations and the block it resumes at (forward()).
  Workspace paused_ws_;
  bool paused_ = false;
  int paused_block_ = 0;
  int paused_parts_ = 1;  // its attention parts a layer
};

}  // namespace tern
