// tern bench: prefill, decode and batched-decode throughput, like llama-bench.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common.h"
#include "tern/core/task_pool.h"
#include "tern/kernels/ops.h"

namespace tern::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Tokens to feed: a fixed pseudo-random walk over the vocabulary.
std::vector<int32_t> bench_tokens(int n, int n_vocab) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  uint32_t x = 12345;
  for (auto& t : v) {
    x = x * 1664525u + 1013904223u;
    t = int32_t(100 + (x >> 8) % uint32_t(n_vocab - 200));
  }
  return v;
}

// Prefill `pp` tokens into one fresh sequence, in chunks of `chunk`.
double run_prefill(Engine& e, int pp, int chunk) {
  const auto toks = bench_tokens(pp, e.n_vocab());
  const SeqId s = e.new_sequence();
  StepOutput out;
  const auto t0 = Clock::now();
  for (int b = 0; b < pp; b += chunk) {
    Batch batch;
    const int n = std::min(chunk, pp - b);
    batch.entries.push_back({s, std::span<const int32_t>(toks).subspan(size_t(b), size_t(n)),
                             b + n == pp ? LogitsMode::Last : LogitsMode::None});
    e.step(batch, out);
  }
  const double sec = seconds_since(t0);
  e.free_sequence(s);
  return pp / sec;
}

// `batch` sequences decode `tg` tokens each, one batched forward pass per step.
double run_decode(Engine& e, int tg, int batch_size) {
  const auto toks = bench_tokens(tg * batch_size + 1, e.n_vocab());
  std::vector<SeqId> seqs;
  for (int i = 0; i < batch_size; ++i) seqs.push_back(e.new_sequence());
  StepOutput out;
  Batch batch;
  batch.entries.resize(size_t(batch_size));
  // One warm-up token per sequence (not timed): the first step sizes buffers.
  for (int i = 0; i < batch_size; ++i) batch.entries[size_t(i)] = {seqs[size_t(i)], {&toks[size_t(i)], 1}, LogitsMode::Last};
  e.step(batch, out);
  const auto t0 = Clock::now();
  for (int step = 0; step < tg; ++step) {
    for (int i = 0; i < batch_size; ++i) {
      batch.entries[size_t(i)].tokens = {&toks[size_t(step * batch_size + i + 1)], 1};
    }
    e.step(batch, out);
  }
  const double sec = seconds_since(t0);
  for (SeqId s : seqs) e.free_sequence(s);
  return double(tg) * batch_size / sec;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    int pp = 512;
    int tg = 128;
    std::vector<int> batches{1, 4, 16};
    int reps = 3;
    int chunk = 512;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("bench", "measure prefill / decode / batched decode tokens/s");
  o->model.add(*cmd);
  cmd->add_option("--pp", o->pp, "prompt tokens for the prefill test (0: skip)");
  cmd->add_option("--tg", o->tg, "generated tokens per sequence for decode tests (0: skip)");
  cmd->add_option("--batch", o->batches, "batch sizes for decode (repeatable or comma list)")
      ->delimiter(',');
  cmd->add_option("-r,--reps", o->reps, "repetitions (best is reported)")->check(CLI::Range(1, 100));
  cmd->add_option("--chunk", o->chunk, "prefill tokens per forward pass")->check(CLI::Range(1, 8192));
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([o] {
    int max_b = 1;
    for (int b : o->batches) max_b = std::max(max_b, b);
    auto engine = load_engine(o->model, max_b);
    nlohmann::json j;
    j["model"] = engine->config().name;
    j["threads"] = engine->pool().size();
    j["kernels"] = kernels::kernel_isa();
    auto best = [&](auto fn) {
      double b = 0;
      for (int r = 0; r < o->reps; ++r) b = std::max(b, fn());
      return b;
    };
    if (o->pp > 0) {
      const double tps = best([&] { return run_prefill(*engine, o->pp, o->chunk); });
      j["prefill"] = {{"tokens", o->pp}, {"tokens_per_s", tps}};
      if (!o->json) std::printf("prefill  pp%-5d %10.1f t/s\n", o->pp, tps);
    }
    if (o->tg > 0) {
      for (int b : o->batches) {
        const double tps = best([&] { return run_decode(*engine, o->tg, b); });
        j["decode"].push_back({{"batch", b}, {"tokens", o->tg}, {"tokens_per_s", tps}});
        if (!o->json) std::printf("decode   tg%-4d batch %-3d %8.1f t/s\n", o->tg, b, tps);
      }
    }
    if (o->json) std::printf("%s\n", j.dump().c_str());
  });
}

}  // namespace tern::cli
