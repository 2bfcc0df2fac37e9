// The persistent prefix cache's life cycle in `tern serve` (see cache_dir.h).
#include "cache_dir.h"

#include <chrono>

#include "tern/core/log.h"
#include "tern/engine/engine.h"
#include "tern/kv/kv_events.h"
#include "tern/kv/kv_persist.h"
#include "tern/kv/paged_kv.h"
#include "tern/sched/scheduler.h"

namespace tern::cli {
namespace {

const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = log::get("cache");
  return l;
}

}  // namespace

PersistentCache::PersistentCache(const CacheDirOptions& opts)
    : opts_(opts), lock_(std::make_unique<kv::CacheDirLock>(opts.dir)) {}

PersistentCache::~PersistentCache() {
  stop_periodic();
}

void PersistentCache::load(Engine& engine) {
  const kv::PersistStats st = kv::load_prefix_cache(engine.kv(), opts_.dir);
  if (st.ignored || st.dropped > 0) {
    logger()->warn("{}", st.message);
  } else {
    logger()->info("{} in {:.0f} ms", st.message, st.ms);
  }
}

void PersistentCache::save(Engine& engine, int budget_ms, const char* why) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms);
  try {
    const kv::PersistStats st =
        kv::save_prefix_cache(engine.kv(), opts_.dir, opts_.max_mb << 20, deadline);
    if (st.failed) {
      logger()->warn("{} snapshot: {}", why, st.message);
    } else {
      logger()->info("{} snapshot: {} in {:.0f} ms", why, st.message, st.ms);
    }
  } catch (const std::exception& e) {
    logger()->warn("{} snapshot failed: {}", why, e.what());
  }
}

void PersistentCache::start_periodic(Engine& engine, sched::Scheduler& s) {
  if (opts_.interval_s <= 0) return;
  thread_ = std::thread([this, &engine, &s] {
    const auto every = std::chrono::duration<double>(opts_.interval_s);
    uint64_t saved_seq = engine.kv_events().last_seq();
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, every, [&] { return stopping_; })) {
      // Nothing stored or removed since the last snapshot: nothing to write.
      const uint64_t seq = engine.kv_events().last_seq();
      if (seq == saved_seq) continue;
      // The snapshot reads the KV cache, so it runs on the engine thread
      // between two steps and delays the next one by its write time: wait
      // (up to one more interval) for a moment with no request running.
      const auto give_up = std::chrono::steady_clock::now() + every;
      while (!s.idle() && std::chrono::steady_clock::now() < give_up &&
             !cv_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stopping_; })) {
      }
      if (stopping_) break;
      saved_seq = seq;
      s.post([this, &engine] { save(engine, opts_.persist_on_exit_ms, "periodic"); });
    }
  });
}

void PersistentCache::stop_periodic() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PersistentCache::save_at_exit(Engine& engine) {
  stop_periodic();
  save(engine, opts_.persist_on_exit_ms, "exit");
}

}  // namespace tern::cli
