#pragma once
// The facade the scheduler drives: one loaded model, its tokenizer and chat
// template, a KV cache, and a task pool. step() runs ONE forward pass over a
// batch of sequences (prefill chunks and decode tokens mixed) and returns the
// logits the batch asked for. Single-threaded API: call from the engine thread.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <functional>

#include "tern/model/batch.h"
#include "tern/model/config.h"
#include "tern/model/model.h"

namespace tern {

class Tokenizer;
class ChatTemplate;
class TaskPool;
class KvCache;

struct EngineOptions {
  std::string model_path;  // GGUF file
  int n_threads = 0;       // 0: one per core
  int n_ctx = 4096;        // max tokens per sequence (clamped to the model's context)
  int max_seqs = 64;       // max live sequences in the KV cache
  LoadOptions load;        // weight repacking policy
};

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

  // Sequences own KV. new_sequence() throws tern::Error when max_seqs are live.
  SeqId new_sequence();
  void free_sequence(SeqId seq);
  int seq_len(SeqId seq) const;  // tokens already in the KV
  int free_sequences() const;

  // One forward pass. Every entry appends its tokens to its sequence's KV at
  // positions seq_len(seq) .. seq_len(seq)+n-1. Logits are returned per the
  // entry's LogitsMode in batch order: StepOutput::row(i) etc.
  void step(const Batch& batch, StepOutput& out);

 private:
  Engine();
  struct Text;  // tokenizer + chat template
  std::unique_ptr<Text> text_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> kv_;
  std::unique_ptr<TaskPool> pool_;
  int n_ctx_ = 0;
};

}  // namespace tern
