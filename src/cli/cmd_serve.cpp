// tern serve: the OpenAI-compatible HTTP + WebSocket server with continuous
// batching. Loopback only unless --host says otherwise.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>

#include "cache_dir.h"
#include "commands.h"
#include "common.h"
#include "tern/core/error.h"
#include "tern/core/log.h"
#include "tern/core/memory_budget.h"
#include "tern/engine/engine.h"
#include "tern/sched/metrics.h"
#include "tern/sched/scheduler.h"
#include "tern/server/server.h"

namespace tern::cli {
namespace {

// --lora NAME=FILE, each validated against the model: a bad one is logged
// and skipped, so the server starts with the others.
void load_adapters(Engine& engine, const std::vector<std::string>& specs) {
  auto log = tern::log::get("server");
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    try {
      if (eq == std::string::npos) throw InvalidArgument("expected NAME=FILE");
      const auto a =
          engine.adapters().load(spec.substr(0, eq), spec.substr(eq + 1), engine.config());
      log->info("LoRA adapter '{}': {} matrices, rank <= {}, alpha {}", spec.substr(0, eq),
                a->n_matrices(), a->max_rank(), a->alpha());
    } catch (const Error& e) {
      log->error("--lora {} refused: {}", spec, e.what());
    }
  }
}

// The process ends without running destructors: the one exit outside main,
// for a shutdown that must not wait on a thread stuck in long work.
[[noreturn]] void end_process_now() {
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace

namespace {

// Images and video in chat messages (server/media_parts.h).
void add_media_flags(CLI::App& cmd, server::MediaOptions& m, size_t& media_mb, size_t& cache_mb) {
  cmd.add_option("--mmproj", m.mmproj,
                 "projector GGUF (llama.cpp mmproj) for the model: with a vision projector, "
                 "chat messages may carry image_url / video parts; with an audio encoder "
                 "(ultravox, qwen2a, voxtral), input_audio / audio_url parts");
  cmd.add_option("--media-dir", m.media_dir,
                 "allow local image / video paths and file:// URLs under this directory "
                 "(default: none are allowed)");
  cmd.add_flag("--allow-remote-media", m.allow_remote,
               "fetch http(s):// image and video URLs (off by default; size, time and redirect "
               "limits apply; loopback, private and link-local addresses are refused)");
  cmd.add_option("--allow-media-hosts", m.allow_hosts,
                 "with --allow-remote-media: host names or IP addresses (comma-separated) that may "
                 "be fetched although they are loopback, private or link-local")
      ->delimiter(',');
  cmd.add_option("--max-image-pixels", m.max_image_pixels,
                 "largest decoded image or video frame, in pixels (400 beyond)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 32))
      ->capture_default_str();
  cmd.add_option("--max-audio-seconds", m.max_audio_seconds,
                 "longest audio clip accepted, in seconds (400 beyond, decided from the file's "
                 "headers before decoding)")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  cmd.add_option("--max-media-mb", media_mb, "largest encoded image or video, in MiB (400 beyond)")
      ->check(CLI::Range(size_t(1), size_t(1) << 12))
      ->capture_default_str();
  cmd.add_option("--mm-cache-mb", cache_mb, "MiB of image and audio embeddings cached in memory")
      ->check(CLI::Range(size_t(0), size_t(1) << 20))
      ->capture_default_str();
  cmd.add_option("--mm-cache-dir", m.cache_dir,
                 "also keep image and audio embeddings in this directory (found again after "
                 "eviction and restarts)");
}

void apply_media_flags(server::MediaOptions& m, size_t media_mb, size_t cache_mb) {
  m.max_media_bytes = media_mb << 20;
  m.cache_bytes = cache_mb << 20;
  if (!m.media_dir.empty() && !std::filesystem::is_directory(m.media_dir))
    throw InvalidArgument("--media-dir " + m.media_dir + " is not a directory");
}

// The one memory budget (--mem-budget-mb): by default the KV DRAM budget
// plus the embedding cache's plus decoded media's (--mm-pixels-mb); a smaller
// one also caps the KV arena. Decoded media may hold at most --mm-pixels-mb
// of it, and at most a quarter of a budget given explicitly, so pictures
// waiting in the queue never take the room running requests need.
std::unique_ptr<MemoryBudget> make_budget(ModelFlags& model, size_t budget_mb, size_t mm_cache_mb,
                                          size_t pixels_mb, size_t draft_kv_mb) {
  const bool given = budget_mb != 0;
  if (!given) budget_mb = model.kv_dram_mb + draft_kv_mb + mm_cache_mb + pixels_mb;
  const size_t pixels = given ? std::min(pixels_mb << 20, (budget_mb << 20) / 4) : pixels_mb << 20;
  if (model.kv_dram_mb > budget_mb) {
    tern::log::get("server")->info("--kv-dram-mb {} is capped by --mem-budget-mb {}",
                                   model.kv_dram_mb, budget_mb);
    model.kv_dram_mb = budget_mb;
  }
  tern::log::get("server")->info(
      "memory budget: {} MiB for KV blocks, image embeddings and decoded media (KV at most {} "
      "MiB, embedding cache at most {} MiB, decoded media at most {} MiB)",
      budget_mb, model.kv_dram_mb, mm_cache_mb, pixels >> 20);
  auto budget = std::make_unique<MemoryBudget>(budget_mb << 20);
  budget->set_limit(MemPool::MmPixels, pixels);
  return budget;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    server::ServerOptions server;
    sched::SchedulerOptions sched;
    int max_seqs = 0;
    size_t body_limit_kib = 1024;
    size_t ws_outbox_kib = 1024;
    CacheDirOptions cache;
    size_t media_mb = 20;
    size_t mm_cache_mb = 256;
    size_t mem_budget_mb = 0;  // 0: --kv-dram-mb + --mm-cache-mb + --mm-pixels-mb
    size_t mm_pixels_mb = 512;
    std::vector<std::string> loras;  // --lora NAME=FILE
    std::string spec = "auto";       // --spec
    int spec_draft = 16;             // --spec-draft
    std::string draft_model;         // --draft-model
    std::string pooling;             // --pooling; empty: the file's, else mean
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "serve", "serve the model over an OpenAI-compatible HTTP API and WebSocket");
  o->model.add(*cmd);
  auto& s = o->server;
  cmd->add_option("--host", s.host, "address to bind (default 127.0.0.1: loopback only)")
      ->capture_default_str();
  cmd->add_option("--port", s.port, "port to listen on (0: any free port)")->capture_default_str();
  cmd->add_option("--api-key", s.api_key,
                  "require 'Authorization: Bearer KEY' on /v1/* and /metrics")
      ->envname("TERN_API_KEY");
  cmd->add_option("--cors-origin", s.cors_origins,
                  "allow browser pages from this origin to call the API, e.g. "
                  "http://localhost:3000 (repeatable; '*' for any; default: same origin only)");
  cmd->add_flag("--strict-fields", s.strict_fields,
                "refuse requests carrying fields tern does not know (400) instead of ignoring "
                "them with a warning");
  cmd->add_option("--reasoning-format", s.reasoning_format,
                  "chat output of reasoning models: 'auto' splits <think>...</think> into "
                  "reasoning_content when the model has those tokens, 'deepseek' always splits, "
                  "'none' keeps the raw text")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, server::ReasoningFormat>{
              {"auto", server::ReasoningFormat::Auto},
              {"none", server::ReasoningFormat::None},
              {"deepseek", server::ReasoningFormat::Deepseek}},
          CLI::ignore_case))
      ->capture_default_str();
  cmd->add_option("--alias", s.model_name, "model id reported by /v1/models (default: file name)");
  cmd->add_option("--web-root", s.web_root,
                  "directory of the demo page (default: web/ of the install)");
  cmd->add_option("--max-batch", o->sched.max_batch, "sequences decoding together")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--max-queue", o->sched.max_queue, "waiting requests before answering 429")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--step-tokens", o->sched.step_tokens,
                  "tokens per forward pass (decode + prefill chunks; at least --max-batch)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--itl-slack", o->sched.itl_slack,
                  "while streams decode, size each step's prefill share so the step takes at "
                  "most this multiple of a decode-only step (their inter-token latency during a "
                  "long prompt); 0: always the full --step-tokens")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  cmd->add_flag("--long-prompt-passes", o->sched.long_prompt_passes,
                "beside decoding streams, a prompt longer than --step-tokens runs in passes of "
                "its own and the streams decode in their pauses at the --itl-slack pace (instead "
                "of steps that carry a share of it)");
  cmd->add_option("--yield-ms", o->sched.yield_ms,
                  "a running forward pass pauses between layers for newly arrived short "
                  "prompts (at most --step-tokens), which run whole first, when what is left "
                  "of it would take longer than this; 0: passes never yield")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--pooled-slack", o->sched.pooled_slack,
                  "the same bound for embedding and rerank prompts beside decoding streams "
                  "(the smaller of the two applies to them)")
      ->check(CLI::Range(1.0, 100.0))
      ->capture_default_str();
  cmd->add_option("--session-ttl", o->sched.session_ttl_s,
                  "seconds a session's last-turn KV stays pinned in DRAM after the request ends "
                  "(session key: X-Session-Id header, the `user` field, or the WebSocket "
                  "connection); pinned blocks are evicted only after every unpinned one, to "
                  "flash first; 0: no pinning")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--spec", o->spec,
                  "speculative decoding (guessed tokens checked in one pass; outputs "
                  "unchanged): 'auto' guesses by prompt lookup (tokens the answer copies from "
                  "its context), then with --draft-model, while at most --spec-max-batch "
                  "sequences decode; 'ngram' prompt lookup only, at any batch; 'draft' the draft "
                  "model only; 'off'")
      ->check(CLI::IsMember({"auto", "ngram", "draft", "off"}))
      ->capture_default_str();
  cmd->add_option("--draft-model", o->draft_model,
                  "a smaller GGUF with the same vocabulary that guesses tokens for speculative "
                  "decoding (greedy, on the same threads)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--spec-draft", o->spec_draft, "most tokens guessed per verify")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--spec-max-batch", o->sched.spec_max_batch,
                  "guess only while at most this many sequences decode")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--kv-tokens", o->sched.kv_tokens,
                  "admit while KV tokens in use fit this (0: no limit)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40))
      ->capture_default_str();
  cmd->add_option("--max-seqs", o->max_seqs, "KV cache sequences (default: --max-batch)")
      ->check(CLI::Range(0, 4096));
  auto* body_limit =
      cmd->add_option("--body-limit", o->body_limit_kib,
                      "max request body in KiB (413 beyond; default 1024, or 8192 with --mmproj: "
                      "about 3 minutes of base64 16 kHz WAV, or a 6 MB picture)")
          ->check(CLI::Range(size_t(1), size_t(1) << 20));
  cmd->add_option("--idle-timeout", s.idle_timeout_s, "seconds a keep-alive connection may idle")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_option("--write-timeout", s.write_timeout_s,
                  "seconds a client may leave a response or WebSocket frame unread before it is "
                  "dropped (a WebSocket is closed with 1008)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_option("--ws-outbox-kb", o->ws_outbox_kib,
                  "KiB of frames queued per WebSocket before the server stops reading its "
                  "requests and pauses its generations (backpressure)")
      ->check(CLI::Range(size_t(16), size_t(1) << 20))
      ->capture_default_str();
  cmd->add_option("--shutdown-grace", s.shutdown_grace_s,
                  "seconds running generations may finish after SIGINT/SIGTERM")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--ws-max-generations", s.ws_max_generations,
                  "concurrent generations per WebSocket")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--cache-dir", o->cache.dir,
                  "keep the prefix cache in this directory across restarts (locked: one "
                  "server per directory)");
  cmd->add_option("--cache-dir-mb", o->cache.max_mb,
                  "MiB of --cache-dir file: the most recently used blocks that fit")
      ->check(CLI::Range(size_t(1), size_t(1) << 24))
      ->capture_default_str();
  cmd->add_option("--persist-on-exit-ms", o->cache.persist_on_exit_ms,
                  "time bound of the --cache-dir snapshot written at exit (after the drain)")
      ->check(CLI::Range(0, 3600 * 1000))
      ->capture_default_str();
  cmd->add_option("--persist-interval", o->cache.interval_s,
                  "seconds between --cache-dir snapshots while serving (0: only at exit)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  add_media_flags(*cmd, o->server.media, o->media_mb, o->mm_cache_mb);
  cmd->add_option("--mem-budget-mb", o->mem_budget_mb,
                  "one memory budget in MiB for KV blocks in DRAM and image embeddings (cached "
                  "and in use by requests); a request with images waits until its rows fit, and "
                  "one that never could gets 503 (default: --kv-dram-mb + --mm-cache-mb + "
                  "--mm-pixels-mb)")
      ->check(CLI::Range(size_t(1), size_t(1) << 24));
  cmd->add_option("--mm-pixels-mb", o->mm_pixels_mb,
                  "MiB of decoded images and video frames held at once, by requests being "
                  "prepared, queued or running (part of --mem-budget-mb, at most a quarter of it "
                  "when that is given); a request whose pictures do not fit gets 503")
      ->check(CLI::Range(size_t(1), size_t(1) << 20))
      ->capture_default_str();
  cmd->add_option("--lora", o->loras,
                  "NAME=FILE: a LoRA adapter requests pick as model \"<model>:NAME\" or "
                  "\"lora\": \"NAME\" (repeatable; a bad one is refused, the rest load)");
  cmd->add_option("--lora-dir", o->server.lora_dir,
                  "allow POST /v1/adapters to load adapter files under this directory (default: "
                  "none, loading adapters over HTTP is off)");
  cmd->add_option("--pooling", o->pooling,
                  "how POST /v1/embeddings pools a sequence's final hidden states: mean, cls "
                  "(first token) or last (default: the file's pooling_type, else mean; a "
                  "reranker's file says rank: it answers POST /v1/rerank, and embeds only "
                  "with this flag)")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  cmd->callback([o, cmd, body_limit] {
    // Media arrive base64 in the body: a server with a projector takes larger
    // bodies unless told otherwise (still bounded: --max-media-mb bounds each item).
    if (body_limit->count() == 0 && !o->server.media.mmproj.empty()) o->body_limit_kib = 8192;
    o->server.body_limit = o->body_limit_kib * 1024;
    apply_media_flags(o->server.media, o->media_mb, o->mm_cache_mb);
    if (!o->server.lora_dir.empty() && !std::filesystem::is_directory(o->server.lora_dir))
      throw InvalidArgument("--lora-dir " + o->server.lora_dir + " is not a directory");
    o->server.ws_outbox_bytes = o->ws_outbox_kib * 1024;
    o->sched.draft_max = o->spec == "off" ? 0 : o->spec_draft;
    if (o->spec == "ngram") o->sched.spec_max_batch = std::numeric_limits<int>::max();
    if (o->spec == "ngram") o->sched.spec_source = sched::SpecSource::Ngram;
    if (o->spec == "draft") o->sched.spec_source = sched::SpecSource::Draft;
    if (o->spec == "draft" && o->draft_model.empty())
      throw InvalidArgument("--spec draft needs --draft-model FILE");
    // A large --max-batch raises the default step budget with it.
    if (cmd->count("--step-tokens") == 0)
      o->sched.step_tokens = std::max(o->sched.step_tokens, o->sched.max_batch);
    const std::string path = o->model.model.empty() ? default_model_path() : o->model.model;
    if (o->server.model_name.empty())
      o->server.model_name = std::filesystem::path(path).stem().string();
    // Lock the cache directory before the (long) model load: a second server fails fast.
    std::unique_ptr<PersistentCache> cache;
    if (!o->cache.dir.empty()) cache = std::make_unique<PersistentCache>(o->cache);
    // The draft model's KV: a quarter of the model's, at least 64 MiB.
    const size_t draft_kv_mb = o->draft_model.empty() || o->spec == "off"
                                   ? 0
                                   : std::max<size_t>(64, o->model.kv_dram_mb / 4);
    const auto budget =
        make_budget(o->model, o->mem_budget_mb, o->mm_cache_mb, o->mm_pixels_mb, draft_kv_mb);
    o->server.media.budget = budget.get();
    auto engine =
        load_engine(o->model, o->max_seqs > 0 ? o->max_seqs : o->sched.max_batch, budget.get());
    if (cache) cache->load(*engine);
    std::unique_ptr<Engine> draft;
    if (draft_kv_mb > 0) {
      draft = load_draft_engine(o->model, o->draft_model, *engine,
                                o->max_seqs > 0 ? o->max_seqs : o->sched.max_batch, draft_kv_mb,
                                budget.get());
      o->sched.draft = draft.get();
      o->server.draft_model = true;
    }
    load_adapters(*engine, o->loras);
    o->server.pooling = resolve_pooling(
        engine->config().pooling, o->pooling.empty() ? std::nullopt : parse_pooling(o->pooling));
    sched::Metrics metrics;
    sched::Scheduler scheduler(*engine, o->sched, metrics);
    bool abandoned = false;
    {
      server::Server srv(*engine, scheduler, metrics, o->server);
      srv.listen();
      scheduler.start();
      if (cache) cache->start_periodic(*engine, scheduler);
      srv.run();
      abandoned = srv.preparation_abandoned();
      if (cache) cache->stop_periodic();
      scheduler.stop();  // before the reactor goes: streams post to it
    }
    if (cache) cache->save_at_exit(*engine);  // the engine thread is gone: nothing steps
    // A preparation thread still running may use the engine and scheduler:
    // end the process here, without destroying them (and without waiting).
    if (abandoned) end_process_now();
  });
}

}  // namespace tern::cli
