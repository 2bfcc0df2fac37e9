#pragma once
// The facade the scheduler drives: one loaded model, its tokenizer and chat
// template, a KV cache, and a task pool. step() runs ONE forward pass over a
// batch of sequences (prefill chunks and decode tokens mixed) and returns the
// logits the batch asked for. Single-threaded API: call from the engine thread.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tern/kv/kv_types.h"
#include "tern/model/batch.h"
#include "tern/model/config.h"

namespace tern {

class MemoryBudget;
class Tokenizer;
class ChatTemplate;
class TaskPool;
class Model;
class RankHead;
namespace kv {
class PagedKv;
class KvEventLog;
}  // namespace kv

struct EngineOptions {
  std::string model_path;  // GGUF file
  int n_threads = 0;       // 0: one per core
  int n_ctx = 4096;        // max tokens per sequence (clamped to the model's context)
  int max_seqs = 64;       // max live sequences in the KV cache
  // Packed format of every linear weight; Auto: the model's per-tensor policy
  // (int4 from 4-bit sources, int8 otherwise; the output head prefers int8).
  // F16 / Bf16: float sources (F16, BF16, F32) as 16-bit float tiles with
  // fp32 activations (F16 and BF16 kept as they are; F32 rounded to the one
  // asked for), quantized sources as Auto (kernels::float_format_for).
  enum class Weights : uint8_t { Auto, Int4, Int8, F16, Bf16 };
  Weights weights = Weights::Auto;
  // KV memory hierarchy (kv/paged_kv.h).
  kv::KvType kv_type = kv::KvType::Int8Fp8;
  size_t kv_dram_mb = 1024;    // DRAM budget for KV blocks and flash staging (committed as used)
  std::string kv_flash_dir;    // empty: kv::default_flash_dir()
  size_t kv_flash_mb = 4096;   // spill file budget; 0 turns the flash tier off
  int kv_prefetch_layers = 1;  // flash reads run this many layers ahead
  size_t kv_staging_mb = 0;    // of kv_dram_mb, buffers for streamed blocks; 0: 1/16 of it
  bool prefix_reuse = true;    // false: no prompt reuses cached KV (kv::KvConfig)
  // The chat template: the model file's own unless one of these is set.
  std::string chat_template;       // a built-in format by name (ChatTemplate::of_name)
  std::string chat_template_file;  // a Jinja template file
  // The one memory budget KV blocks and image embeddings share (null: none;
  // see core/memory_budget.h). It must outlive the engine.
  MemoryBudget* budget = nullptr;
  // Run on this task pool instead of one of the engine's own (n_threads is
  // then ignored): a draft model beside its target shares the target's
  // workers, which run one model's step at a time. It must outlive the engine.
  TaskPool* pool = nullptr;
};

// Why `draft` cannot propose tokens for `target` in speculative decoding
// (the guesses are token ids, so both need one vocabulary: the same size,
// the same text for every id, the same BOS and EOS), or "" when it can.
std::string vocabulary_mismatch(const Tokenizer& target, const Tokenizer& draft);

class Engine {
 public:
  // Loads and validates the model; throws tern::Error with a clear message.
  // progress (0..1) is reported while weights are repacked.
  static std::unique_ptr<Engine> load(const EngineOptions& opts,
                                      const std::function<void(float)>& progress = {});
  ~Engine();

  const ModelConfig& config() const;
  const Tokenizer& tokenizer() const;
  const ChatTemplate& chat_template() const;
  int n_ctx() const { return n_ctx_; }
  int n_vocab() const;
  TaskPool& pool();
  const Model& model() const;
  // The reranker's classification head (model/rank_head.h); null when the
  // model has none.
  const RankHead* rank_head() const;

  // Sequences own KV. new_sequence() throws kv::KvFullError when max_seqs
  // are live. keys: what besides token ids decides the KV (media hashes).
  SeqId new_sequence(const kv::SeqKeys& keys = {});
  // Its full blocks stay in the prefix cache; pinned in DRAM for pin_seconds
  // when > 0 (a session's last turn, kv::PagedKv::release).
  void free_sequence(SeqId seq, double pin_seconds = 0);
  int seq_len(SeqId seq) const;  // tokens already in the KV
  int free_sequences() const;
  // Reuses cached KV for the start of prompt (seq must be empty): returns the
  // tokens reused (a multiple of the block size, less than prompt.size());
  // step() continues from there.
  int attach_prefix(SeqId seq, std::span<const int32_t> prompt);

  // --- KV capacity, as the scheduler needs it (it sees no KV internals) ---
  int block_tokens() const;          // tokens per KV block
  int64_t available_blocks() const;  // blocks that can be made free now
  // The most blocks one sequence alone can hold (DRAM, plus what it may
  // stream from the flash tier).
  int64_t capacity_blocks() const;
  // Makes room in the KV cache for n more tokens of seq before a step.
  enum class Room : uint8_t {
    Ok,
    Full,         // no room can be made: preempt a sequence and retry
    SpillFailed,  // making room needed a flash write that failed: same remedy
    Lost,         // seq's own KV was lost to a flash read error: recompute or fail it
    Invalid,      // past the context, or another misuse: fail the request
  };
  struct Reservation {
    Room room = Room::Ok;
    std::string why;  // what happened, for the log and the request's error
  };
  Reservation reserve(SeqId seq, int n);
  // Non-empty when a flash read seq depended on failed during the last
  // step: its KV is incomplete and the request must be recomputed or ended.
  const std::string& failure(SeqId seq) const;
  // Cache counters and gauges (for /metrics and per-request timings).
  kv::KvStats cache_stats() const;

  // Prefix-cache events (block stored / removed) for GET /v1/kv/events.
  // Thread-safe to read; filled on the engine thread.
  kv::KvEventLog& kv_events();

  // LoRA adapters loaded for this model (thread-safe; the server's
  // --lora and /v1/adapters fill it). A batch entry names its own adapter.
  LoraRegistry& adapters() { return adapters_; }

  // The memory budget the KV cache charges (EngineOptions::budget), or null.
  MemoryBudget* memory_budget() const { return budget_; }

  // The KV cache itself: the persistent prefix cache saves and loads it
  // (cli/cache_dir.cpp); tests and benchmarks inject faults and check invariants.
  kv::PagedKv& kv();
  const kv::PagedKv& kv() const;

  // One forward pass. Every entry appends its tokens to its sequence's KV at
  // positions seq_len(seq) .. seq_len(seq)+n-1. Logits are returned per the
  // entry's LogitsMode in batch order: StepOutput::row(i) etc. Throws
  // InvalidArgument past the context, kv::KvFullError when the KV pool has
  // no room (nothing changed: preempt a sequence and retry), kv::KvIoError
  // when a sequence's flash tier failed. After a step, a sequence whose flash
  // reads failed has a non-empty kv().failure(seq) and must be ended.
  void step(const Batch& batch, StepOutput& out);
  // A step that may pause between two blocks for another to run first (a
  // layer is its attention, in one part or several for a long pass at
  // depth, then its FFN; n_blocks in all): after each block but the last,
  // yield(block, n_blocks) is asked (when the KV cache can suspend
  // the step: nothing of it streams from flash), and true pauses it (false
  // returned). Until resume() finishes it, step() may run other
  // batches (over other sequences; reserve(), attach_prefix() and commit()
  // work for them, but no live block spills to flash meanwhile, and none of
  // the paused batch's sequences may be freed or changed). resume() takes
  // the same batch and out and may pause again. The result is the same bits
  // as an uninterrupted step.
  using YieldCheck = std::function<bool(int block, int n_blocks)>;
  bool step(const Batch& batch, StepOutput& out, const YieldCheck& yield);
  bool resume(const Batch& batch, StepOutput& out, const YieldCheck& yield);
  bool paused() const;
  // Commits the first tokens of an entry that ran with commit = false: they
  // must be the tokens that entry wrote, from seq_len(seq) on.
  void commit(SeqId seq, std::span<const int32_t> tokens);
  // An embedding's pooled vector through the model's dense projections
  // (Model::project_pooled; EmbeddingGemma's), before normalisation.
  std::vector<float> project_pooled(std::vector<float> pooled) const;

 private:
  Engine();
  struct Text;  // tokenizer + chat template
  std::unique_ptr<Text> text_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<kv::KvEventLog> events_;  // before kv_: outlives it
  std::unique_ptr<kv::PagedKv> kv_;
  std::unique_ptr<TaskPool> own_pool_;
  TaskPool* pool_ = nullptr;  // own_pool_, or EngineOptions::pool
  int n_ctx_ = 0;
  LoraRegistry adapters_;
  MemoryBudget* budget_ = nullptr;
};

}  // namespace tern
