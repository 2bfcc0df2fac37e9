#include "tern/engine/engine.h"

#include <algorithm>
#include <chrono>

#include "tern/core/error.h"
#include "tern/core/log.h"
#include "tern/core/task_pool.h"
#include "tern/gguf/gguf.h"
#include "tern/kernels/ops.h"
#include "tern/kv/simple_kv.h"
#include "tern/model/model.h"
#include "tern/tokenizer/chat_template.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

struct Engine::Text {
  Tokenizer tokenizer;
  ChatTemplate chat_template;
};

std::unique_ptr<Engine> Engine::load(const EngineOptions& opts,
                                     const std::function<void(float)>& progress) {
  auto lg = log::get("engine");
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Engine> e(new Engine());
  e->pool_ = std::make_unique<TaskPool>(opts.n_threads);
  auto file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(opts.model_path));
  e->text_ = std::make_unique<Text>(
      Text{Tokenizer::from_gguf(*file), ChatTemplate::from_gguf(*file)});
  e->model_ = Model::load(file, opts.load, *e->pool_, progress);
  const ModelConfig& c = e->model_->config();
  if (e->text_->tokenizer.n_vocab() > c.n_vocab) {
    throw FormatError(opts.model_path + ": tokenizer has " +
                      std::to_string(e->text_->tokenizer.n_vocab()) +
                      " tokens but the embedding table only " + std::to_string(c.n_vocab));
  }
  if (opts.n_ctx <= 0) throw InvalidArgument("context size must be positive");
  e->n_ctx_ = std::min(opts.n_ctx, c.n_ctx_train);
  if (opts.max_seqs <= 0) throw InvalidArgument("max_seqs must be positive");
  e->kv_ = std::make_unique<SimpleKvCache>(c.n_layers, c.kv_dim(), e->n_ctx_, opts.max_seqs);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  lg->info("loaded {} in {:.0f} ms: {} threads, {} kernels, context {}", opts.model_path, ms,
           e->pool_->size(), kernels::kernel_isa(), e->n_ctx_);
  return e;
}

Engine::Engine() = default;
Engine::~Engine() = default;

const ModelConfig& Engine::config() const { return model_->config(); }
const Tokenizer& Engine::tokenizer() const { return text_->tokenizer; }
const ChatTemplate& Engine::chat_template() const { return text_->chat_template; }
int Engine::n_vocab() const { return model_->config().n_vocab; }
TaskPool& Engine::pool() { return *pool_; }
const Model& Engine::model() const { return *model_; }

SeqId Engine::new_sequence() { return kv_->alloc(); }
void Engine::free_sequence(SeqId seq) { kv_->free(seq); }
int Engine::seq_len(SeqId seq) const { return kv_->length(seq); }
int Engine::free_sequences() const { return kv_->free_slots(); }

void Engine::step(const Batch& batch, StepOutput& out) { model_->forward(batch, *kv_, out, *pool_); }

}  // namespace tern
