#include "local_generator.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <random>
#include <thread>

#include "tern/core/log.h"
#include "tern/engine/engine.h"

namespace tern::cli {
namespace {

std::atomic<int> g_interrupt_fd{-1};  // write end of the watcher's pipe (lock-free)

extern "C" void on_sigint(int) {
  const char c = 'i';
  const int fd = g_interrupt_fd.load();
  if (fd >= 0) (void)!::write(fd, &c, 1);  // async-signal-safe
}

// The scheduler for one local client: one sequence at a time, prompt chunks
// as large as the old single-sequence loop used.
sched::SchedulerOptions one_at_a_time() {
  sched::SchedulerOptions o;
  o.max_batch = 1;
  o.max_queue = 1;
  o.step_tokens = 512;
  return o;
}

}  // namespace

// Turns SIGINT into SyncClient::cancel() on a thread of its own: the signal
// handler only writes a byte to a pipe (a handler may not lock a mutex).
class InterruptWatcher {
 public:
  explicit InterruptWatcher(sched::SyncClient& client) : client_(client) {
    if (::pipe2(fds_, O_CLOEXEC) != 0) return;  // no Ctrl-C cancellation: the default applies
    g_interrupt_fd = fds_[1];
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &sa, &old_);
    thread_ = std::thread([this] { watch(); });
  }
  ~InterruptWatcher() {
    if (!thread_.joinable()) return;
    ::sigaction(SIGINT, &old_, nullptr);
    g_interrupt_fd = -1;
    const char q = 'q';
    (void)!::write(fds_[1], &q, 1);
    thread_.join();
    ::close(fds_[0]);
    ::close(fds_[1]);
  }

 private:
  void watch() {
    char c = 0;
    while (::read(fds_[0], &c, 1) == 1 && c != 'q') {
      if (client_.cancel()) continue;
      // Nothing to cancel (waiting at a prompt): Ctrl-C ends the process as usual.
      std::signal(SIGINT, SIG_DFL);
      std::raise(SIGINT);
    }
  }

  sched::SyncClient& client_;
  int fds_[2] = {-1, -1};
  struct sigaction old_ {};
  std::thread thread_;
};

LocalGenerator::LocalGenerator(Engine& engine)
    : scheduler_(engine, one_at_a_time(), metrics_), client_(scheduler_) {
  // One "finished" line per request is server logging; a terminal user asks for --stats.
  auto l = log::get("sched");
  if (!l->should_log(spdlog::level::debug)) l->set_level(spdlog::level::warn);
  std::signal(SIGPIPE, SIG_IGN);  // a closed stdout is a failed write, which cancels
  scheduler_.start();
  interrupt_ = std::make_unique<InterruptWatcher>(client_);
}

LocalGenerator::~LocalGenerator() {
  interrupt_.reset();
  scheduler_.stop();
}

LocalResult LocalGenerator::generate(std::vector<int32_t> prompt, SamplingParams params,
                                     std::vector<vision::MediaSpan> media, LoraSelection lora) {
  LocalResult r;
  if (params.seed == kRandomSeed) {  // drawn here so that --stats can print it
    std::random_device rd;
    params.seed = uint64_t(rd()) << 32 | rd();
  }
  r.seed = params.seed;
  sched::Request req;
  req.id = "cli-" + std::to_string(++n_requests_);
  req.prompt = std::move(prompt);
  req.media = std::move(media);
  req.params = std::move(params);
  req.lora = std::move(lora);
  r.finish = client_.run(std::move(req), [&](std::string_view piece) {
    r.text.append(piece);
    return std::fwrite(piece.data(), 1, piece.size(), stdout) == piece.size() &&
           std::fflush(stdout) == 0;
  });
  return r;
}

void print_stats(const LocalResult& r) {
  const sched::Timings& t = r.finish.timings;
  const int n = t.predicted_n;
  std::fprintf(stderr,
               "prompt: %d tokens (%d cached) in %.1f ms (%.1f t/s); generated %d tokens in %.1f "
               "ms (%.1f t/s); finish: %s; seed %llu\n",
               r.finish.usage.prompt_tokens, r.finish.usage.cached_tokens, t.prompt_ms,
               t.prompt_ms > 0 ? t.prompt_n * 1000.0 / t.prompt_ms : 0.0, n, t.predicted_ms,
               n > 1 && t.predicted_ms > 0 ? (n - 1) * 1000.0 / t.predicted_ms : 0.0,
               sched::to_string(r.finish.reason), (unsigned long long)r.seed);
}

}  // namespace tern::cli
