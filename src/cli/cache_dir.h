#pragma once
// `tern serve --cache-dir DIR`: the prefix cache survives restarts. At start
// the directory is locked (a second server refuses to start) and its file is
// loaded into the KV cache before the scheduler runs; every --persist-interval
// seconds, if the prefix cache changed, a snapshot is written from the engine
// thread between two steps (preferably while no request runs); at
// exit (after the SIGTERM/SIGINT drain) a last one is written within
// --persist-on-exit-ms. Format and failure handling: kv/kv_persist.h.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace tern {
class Engine;
namespace kv {
class CacheDirLock;
}
namespace sched {
class Scheduler;
}
}  // namespace tern

namespace tern::cli {

struct CacheDirOptions {
  std::string dir;       // empty: off
  size_t max_mb = 4096;  // file budget: the most recently used blocks that fit
  int persist_on_exit_ms = 10000;
  double interval_s = 300.0;  // 0: only at exit
};

class PersistentCache {
 public:
  // Locks opts.dir (throws kv::CacheDirInUse / IoError); call before loading the model.
  explicit PersistentCache(const CacheDirOptions& opts);
  ~PersistentCache();  // stops the periodic thread
  PersistentCache(const PersistentCache&) = delete;
  PersistentCache& operator=(const PersistentCache&) = delete;

  void load(Engine& engine);  // before the scheduler starts
  void start_periodic(Engine& engine, sched::Scheduler& s);
  void stop_periodic();
  void save_at_exit(Engine& engine);  // after the scheduler stopped

 private:
  void save(Engine& engine, int budget_ms, const char* why);

  CacheDirOptions opts_;
  std::unique_ptr<kv::CacheDirLock> lock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tern::cli
