#include "tern/engine/engine.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/log.h"
#include "tern/core/sha256.h"
#include "tern/core/task_pool.h"
#include "tern/gguf/gguf.h"
#include "tern/kernels/ops.h"
#include "tern/kv/block_hash.h"
#include "tern/kv/paged_kv.h"
#include "tern/model/model.h"
#include "tern/tokenizer/chat_template.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

namespace {

// SHA-256 over the file's size, its header (metadata and tensor table) and
// the weight format: anything that changes the KV a token produces. Tensor
// data is not hashed (a full read of the file); a file rewritten with new
// weights but the same header and size is the one case this misses; since
// `serve --cache-dir` keeps the prefix cache across restarts under this
// fingerprint, replace a model file by writing a new one (size or header
// differ in practice), or start with an empty cache directory.
std::string model_fingerprint(const gguf::GgufFile& f, const LoadOptions& load) {
  const auto bytes = f.file_bytes();
  std::string s = std::to_string(bytes.size()) + "/" +
                  std::to_string(load.force_format ? int(*load.force_format) : -1) + "/" +
                  std::to_string(int(load.head_format)) + "/" +
                  std::to_string(load.float_format ? int(*load.float_format) : -1) + "/";
  const kv::BlockHash h = tern::sha256(bytes.data(), std::min(bytes.size(), f.data_offset()));
  s.append(reinterpret_cast<const char*>(h.data()), h.size());
  return s;
}

// TERN_KV_FAULT=read|write,ERRNO,COUNT[,AFTER]: a fault-injection hook for
// tests of the flash tier (the server's disk-fault tests set it): after AFTER
// more successful operations of that kind, COUNT fail with -ERRNO.
void inject_fault(kv::PagedKv& kv, const std::string& spec) {
  std::vector<std::string> parts;
  std::stringstream in(spec);
  for (std::string p; std::getline(in, p, ',');) parts.push_back(p);
  int err = 0, count = 0, after = 0;
  auto num = [&](const std::string& s, int& v) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc() && r.ptr == s.data() + s.size() && v >= 0;
  };
  if ((parts.size() != 3 && parts.size() != 4) || (parts[0] != "read" && parts[0] != "write") ||
      !num(parts[1], err) || !num(parts[2], count) ||
      (parts.size() == 4 && !num(parts[3], after))) {
    throw InvalidArgument("TERN_KV_FAULT must be read|write,ERRNO,COUNT[,AFTER], got '" + spec +
                          "'");
  }
  kv.inject_flash_fault(parts[0] == "read" ? kv::IoKind::Read : kv::IoKind::Write, count, err,
                        after);
  log::get("engine")->warn("KV flash fault injection on: {}", spec);
}

// The model's own template unless the options name another (a file that does
// not parse is an error: the user asked for it).
ChatTemplate chat_template_for(const EngineOptions& opts, const gguf::GgufFile& file,
                               const Tokenizer& tok) {
  if (!opts.chat_template.empty()) return ChatTemplate::of_name(opts.chat_template);
  if (opts.chat_template_file.empty()) return ChatTemplate::from_gguf(file, tok);
  constexpr uintmax_t kMaxTemplateBytes = 1 << 20;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(opts.chat_template_file, ec);
  if (ec)
    throw InvalidArgument("--chat-template-file " + opts.chat_template_file + ": " + ec.message());
  if (size > kMaxTemplateBytes)
    throw InvalidArgument("--chat-template-file " + opts.chat_template_file + ": " +
                          std::to_string(size) + " bytes, more than the 1 MiB a template may have");
  std::ifstream in(opts.chat_template_file, std::ios::binary);
  std::string src((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof())
    throw InvalidArgument("--chat-template-file " + opts.chat_template_file + ": cannot read it");
  try {
    return ChatTemplate::from_jinja(src, ChatTemplate::tokens_of(tok));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("--chat-template-file " + opts.chat_template_file + ": " + e.what());
  }
}

}  // namespace

struct Engine::Text {
  Tokenizer tokenizer;
  ChatTemplate chat_template;
};

std::unique_ptr<Engine> Engine::load(const EngineOptions& opts,
                                     const std::function<void(float)>& progress) {
  auto lg = log::get("engine");
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Engine> e(new Engine());
  if (opts.pool) {
    e->pool_ = opts.pool;
  } else {
    e->own_pool_ = std::make_unique<TaskPool>(opts.n_threads);
    e->pool_ = e->own_pool_.get();
  }
  auto file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(opts.model_path));
  LoadOptions load;
  if (opts.weights == EngineOptions::Weights::Int4)
    load.force_format = kernels::WeightFormat::Int4Asym;
  if (opts.weights == EngineOptions::Weights::Int8)
    load.force_format = kernels::WeightFormat::Int8Sym;
  if (opts.weights == EngineOptions::Weights::F16) load.float_format = kernels::WeightFormat::F16;
  if (opts.weights == EngineOptions::Weights::Bf16) load.float_format = kernels::WeightFormat::Bf16;
  // Before repacking releases the mapping: what identifies this model's KV.
  const std::string fingerprint = model_fingerprint(*file, load);
  {
    Tokenizer tok = Tokenizer::from_gguf(*file);
    ChatTemplate tmpl = chat_template_for(opts, *file, tok);
    lg->info("chat template: {}", tmpl.describe());
    e->text_ = std::make_unique<Text>(Text{std::move(tok), std::move(tmpl)});
  }
  e->model_ = Model::load(file, load, *e->pool_, progress);
  const ModelConfig& c = e->model_->config();
  if (e->text_->tokenizer.n_vocab() > c.n_vocab) {
    throw FormatError(opts.model_path + ": tokenizer has " +
                      std::to_string(e->text_->tokenizer.n_vocab()) +
                      " tokens but the embedding table only " + std::to_string(c.n_vocab));
  }
  if (opts.n_ctx <= 0) throw InvalidArgument("context size must be positive");
  e->n_ctx_ = std::min(opts.n_ctx, c.n_ctx_train);
  if (opts.max_seqs <= 0) throw InvalidArgument("max_seqs must be positive");
  kv::KvConfig kc;
  kc.n_layers = c.n_layers;
  kc.n_kv_heads = c.n_kv_heads;
  kc.head_dim = c.head_dim;
  kc.type = opts.kv_type;
  kc.max_seqs = opts.max_seqs;
  kc.max_seq_tokens = e->n_ctx_;
  kc.dram_bytes = opts.kv_dram_mb << 20;
  kc.flash_dir = opts.kv_flash_dir.empty() ? kv::default_flash_dir() : opts.kv_flash_dir;
  kc.flash_bytes = opts.kv_flash_mb << 20;
  kc.prefetch_layers = opts.kv_prefetch_layers;
  kc.staging_bytes = opts.kv_staging_mb << 20;
  kc.prefix_reuse = opts.prefix_reuse;
  kc.model_fingerprint = fingerprint;
  kc.budget = opts.budget;
  e->budget_ = opts.budget;
  try {
    e->kv_ = std::make_unique<kv::PagedKv>(kc);
  } catch (const kv::KvIoError& err) {
    if (kc.flash_bytes == 0) throw;
    // An unusable flash folder costs the spill tier, not the server.
    lg->error("{}; the KV cache runs without a flash tier (DRAM only)", err.what());
    kc.flash_bytes = 0;
    e->kv_ = std::make_unique<kv::PagedKv>(kc);
  }
  e->events_ = std::make_unique<kv::KvEventLog>(8192, e->kv_->block_tokens());
  e->kv_->set_event_sink(e->events_.get());
  if (const char* f = std::getenv("TERN_KV_FAULT")) inject_fault(*e->kv_, f);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  lg->info("loaded {} in {:.0f} ms: {} threads, {} kernels, context {}, KV {} ({} bytes/token)",
           opts.model_path, ms, e->pool_->size(), kernels::kernel_isa(), e->n_ctx_,
           kv::to_string(kc.type), e->kv_->bytes_per_token());
  return e;
}

std::string vocabulary_mismatch(const Tokenizer& target, const Tokenizer& draft) {
  if (target.n_vocab() != draft.n_vocab())
    return std::to_string(target.n_vocab()) + " tokens against " + std::to_string(draft.n_vocab());
  if (target.bos() != draft.bos() || target.eos() != draft.eos())
    return "BOS/EOS ids " + std::to_string(target.bos()) + "/" + std::to_string(target.eos()) +
           " against " + std::to_string(draft.bos()) + "/" + std::to_string(draft.eos());
  for (int32_t id = 0; id < target.n_vocab(); ++id) {
    if (target.token_text(id) != draft.token_text(id))
      return "token " + std::to_string(id) + " is '" + target.token_text(id) + "' against '" +
             draft.token_text(id) + "'";
  }
  return "";
}

Engine::Engine() = default;
Engine::~Engine() = default;

const ModelConfig& Engine::config() const {
  return model_->config();
}
const Tokenizer& Engine::tokenizer() const {
  return text_->tokenizer;
}
const ChatTemplate& Engine::chat_template() const {
  return text_->chat_template;
}
int Engine::n_vocab() const {
  return model_->config().n_vocab;
}
TaskPool& Engine::pool() {
  return *pool_;
}
const Model& Engine::model() const {
  return *model_;
}
const RankHead* Engine::rank_head() const {
  return model_->rank_head();
}

SeqId Engine::new_sequence(const kv::SeqKeys& keys) {
  return kv_->create(keys);
}
void Engine::free_sequence(SeqId seq, double pin_seconds) {
  kv_->release(seq, pin_seconds);
}
int Engine::seq_len(SeqId seq) const {
  return kv_->length(seq);
}
int Engine::free_sequences() const {
  return kv_->free_seq_slots();
}
int Engine::attach_prefix(SeqId seq, std::span<const int32_t> prompt) {
  return kv_->attach_prefix(seq, prompt);
}
int Engine::block_tokens() const {
  return kv_->block_tokens();
}
int64_t Engine::available_blocks() const {
  return kv_->available_blocks();
}
int64_t Engine::capacity_blocks() const {
  return kv_->max_sequence_blocks();
}
const std::string& Engine::failure(SeqId seq) const {
  return kv_->failure(seq);
}
kv::KvStats Engine::cache_stats() const {
  return kv_->stats();
}

Engine::Reservation Engine::reserve(SeqId seq, int n) {
  try {
    kv_->reserve(seq, n);
    return {};
  } catch (const kv::KvFullError& e) {
    return {Room::Full, e.what()};
  } catch (const kv::KvIoError& e) {
    if (const std::string& lost = kv_->failure(seq); !lost.empty()) return {Room::Lost, lost};
    return {Room::SpillFailed, e.what()};
  } catch (const std::exception& e) {
    return {Room::Invalid, e.what()};
  }
}

kv::KvEventLog& Engine::kv_events() {
  return *events_;
}
kv::PagedKv& Engine::kv() {
  return *kv_;
}
const kv::PagedKv& Engine::kv() const {
  return *kv_;
}

std::vector<float> Engine::project_pooled(std::vector<float> pooled) const {
  return model_->project_pooled(std::move(pooled));
}

void Engine::step(const Batch& batch, StepOutput& out) {
  model_->forward(batch, *kv_, out, *pool_);
}

bool Engine::step(const Batch& batch, StepOutput& out, const YieldCheck& yield) {
  return model_->forward(batch, *kv_, out, *pool_, &yield);
}

bool Engine::resume(const Batch& batch, StepOutput& out, const YieldCheck& yield) {
  return model_->resume(batch, *kv_, out, *pool_, &yield);
}

bool Engine::paused() const {
  return model_->paused();
}

void Engine::commit(SeqId seq, std::span<const int32_t> tokens) {
  kv_->commit(seq, tokens);
}

}  // namespace tern
