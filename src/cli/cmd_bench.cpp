// tern bench: prefill, decode and batched-decode throughput, like llama-bench.
#include <chrono>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

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

// Average microseconds of one dispatch-and-join of pool.size() empty tasks.
double dispatch_us(TaskPool& pool) {
  constexpr int kRuns = 20000;
  int64_t sink = 0;
  auto noop = [&](int64_t t, int) { reinterpret_cast<volatile int64_t&>(sink) += t; };
  for (int i = 0; i < 1000; ++i) pool.run(pool.size(), noop);  // warm up, wake workers
  const auto t0 = Clock::now();
  for (int i = 0; i < kRuns; ++i) pool.run(pool.size(), noop);
  return seconds_since(t0) / kRuns * 1e6;
}

// Memory of this process (Linux /proc): peak and current resident set, and how
// much of the model file's mapping is resident (the embedding rows read so
// far, plus pages the repacking touched that the kernel has not dropped).
nlohmann::json memory_report(const std::string& path) {
  std::error_code ec;
  const std::string model_path = std::filesystem::weakly_canonical(path, ec).string();
  nlohmann::json j;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    std::istringstream ls(line);
    std::string key;
    long kb = 0;
    ls >> key >> kb;
    if (key == "VmHWM:") j["peak_rss_mib"] = kb / 1024.0;
    if (key == "VmRSS:") j["rss_mib"] = kb / 1024.0;
    if (key == "RssAnon:") j["rss_anon_mib"] = kb / 1024.0;
    if (key == "RssFile:") j["rss_file_mib"] = kb / 1024.0;
  }
  std::ifstream smaps("/proc/self/smaps");
  bool in_model = false;
  long model_kb = 0, model_size_kb = 0;
  for (std::string line; std::getline(smaps, line);) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      in_model = line.size() >= model_path.size() &&
                 line.compare(line.size() - model_path.size(), model_path.size(), model_path) == 0;
      continue;
    }
    std::istringstream ls(line);
    std::string key;
    long kb = 0;
    ls >> key >> kb;
    if (in_model && key == "Rss:") model_kb += kb;
    if (in_model && key == "Size:") model_size_kb += kb;
  }
  j["model_mapping_mib"] = model_size_kb / 1024.0;
  j["model_mapping_resident_mib"] = model_kb / 1024.0;
  return j;
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
    const auto t_load = Clock::now();
    auto engine = load_engine(o->model, max_b);
    const double load_s = seconds_since(t_load);
    const ModelConfig& c = engine->config();
    nlohmann::json j;
    j["model"] = c.name;
    j["threads"] = engine->pool().size();
    j["kernels"] = kernels::kernel_isa();
    j["load_s"] = load_s;
    j["dispatch_us"] = dispatch_us(engine->pool());
    // Decode reads every repacked weight once per step; prefill's work is the
    // linear layers' multiply-accumulates (the output head runs once per prompt).
    const double layer_macs = double(c.n_layers) *
                              (2.0 * c.d_model * c.q_dim() + 2.0 * c.d_model * c.kv_dim() +
                               3.0 * c.d_model * c.d_ff);
    j["weight_bytes"] = engine->model().packed_bytes();
    j["layer_macs_per_token"] = layer_macs;
    j["head_macs_per_token"] = double(c.d_model) * c.n_vocab;
    if (!o->json) {
      std::printf("load %.2f s, dispatch-and-join %.2f us, %.1f MiB of weights\n", load_s,
                  j["dispatch_us"].get<double>(), double(engine->model().packed_bytes()) / (1 << 20));
    }
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
    j["memory"] = memory_report(engine->model().file().path());
    if (o->json) {
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("memory: peak rss %.1f MiB, model mapping resident %.1f of %.1f MiB\n",
                  j["memory"]["peak_rss_mib"].get<double>(),
                  j["memory"]["model_mapping_resident_mib"].get<double>(),
                  j["memory"]["model_mapping_mib"].get<double>());
    }
  });
}

}  // namespace tern::cli
