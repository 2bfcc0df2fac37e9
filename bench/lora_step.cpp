// lora_step: the cost of one batched decode step with LoRA adapters, measured
// directly on the engine (no server, no HTTP), so that it is robust to a
// noisy machine: configurations are interleaved (0, 1, 4, 16 adapters, then
// again), every step is timed, and the median per configuration is printed
// with its ratio to the no-adapter step, and the same for the process's CPU
// time per step (all threads: with -t 1 it is the step's work, and a busy
// machine inflates it far less than the wall clock; with more threads it
// also counts the pool's spinning).
//
// Each of --rows sequences holds --ctx prompt tokens, then every timed step
// decodes one token for each of them; with k adapters, row i runs adapter
// i % k (rank --rank on every linear layer, made like `tern gen-lora`).
//
// usage: lora_step [-m MODEL] [-t THREADS] [--rows 16] [--rank 16] [--ctx 64]
//                  [--reps 40] [--adapters 1,4,16]
// Build: ninja -C build lora_step
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tern/core/log.h"
#include "tern/engine/engine.h"
#include "tern/gguf/gguf.h"
#include "tern/model/batch.h"
#include "tern/model/gen_arch.h"
#include "tern/model/lora.h"

namespace {

using Clock = std::chrono::steady_clock;

// CPU time of the whole process (all threads), ms: on a busy machine it
// does not count the time the threads waited for a core, so it shows the
// work a step does when the wall clock is too noisy to.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tern;
  std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  int threads = 2, rows = 16, rank = 16, ctx = 64, reps = 40;
  std::vector<int> counts = {1, 4, 16};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "-m")
      model = argv[i + 1];
    else if (a == "-t")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--rows")
      rows = std::atoi(argv[i + 1]);
    else if (a == "--rank")
      rank = std::atoi(argv[i + 1]);
    else if (a == "--ctx")
      ctx = std::atoi(argv[i + 1]);
    else if (a == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (a == "--adapters")
      counts = parse_list(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  log::init("warn");
  EngineOptions eo;
  eo.model_path = model;
  eo.n_threads = threads;
  eo.n_ctx = ctx + 8 * reps * int(counts.size() + 1);
  eo.max_seqs = rows;
  eo.kv_flash_mb = 0;
  auto engine = Engine::load(eo);
  const int n_ad = *std::max_element(counts.begin(), counts.end());
  std::vector<std::shared_ptr<const LoraAdapter>> ads;
  {
    const gguf::GgufFile base = gguf::GgufFile::open(model);
    for (int i = 0; i < n_ad; ++i) {
      GenLoraOptions o;
      o.rank = rank;
      o.seed = uint64_t(i + 1);
      const std::string path =
          "/tmp/lora_step_" + std::to_string(getpid()) + "_" + std::to_string(i) + ".gguf";
      generate_lora(base, o).writer.write(path);
      ads.push_back(LoraAdapter::load(path, engine->config()));
      std::remove(path.c_str());
    }
  }
  // Prefill every sequence (no adapter: the KV's content does not change the cost).
  std::vector<SeqId> seqs;
  StepOutput out;
  for (int r = 0; r < rows; ++r) {
    seqs.push_back(engine->new_sequence());
    std::vector<int32_t> toks(static_cast<size_t>(ctx));
    for (int j = 0; j < ctx; ++j) toks[size_t(j)] = 100 + (r * 31 + j * 7) % 5000;
    Batch b;
    b.entries.push_back({seqs.back(), toks, LogitsMode::Last, {}, {}});
    engine->step(b, out);
  }
  std::vector<int> configs = {0};
  configs.insert(configs.end(), counts.begin(), counts.end());
  std::vector<std::vector<double>> ms(configs.size()), cpu(configs.size());
  for (int rep = -2; rep < reps; ++rep) {  // two warm-up rounds
    for (size_t c = 0; c < configs.size(); ++c) {
      Batch b;
      std::vector<int32_t> toks(static_cast<size_t>(rows));
      for (int r = 0; r < rows; ++r) {
        LoraSelection sel;
        if (configs[c] > 0) sel = {ads[size_t(r % configs[c])], 1.0f};
        toks[size_t(r)] = int32_t(200 + r + rep);
        b.entries.push_back({seqs[size_t(r)], {&toks[size_t(r)], 1}, LogitsMode::Last, {}, sel});
      }
      const auto t0 = Clock::now();
      const double c0 = cpu_ms();
      engine->step(b, out);
      const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (rep >= 0) {
        ms[c].push_back(t);
        cpu[c].push_back(cpu_ms() - c0);
      }
    }
  }
  size_t ad_bytes = 0;  // what one adapter streams per step
  for (int l = 0; l < engine->config().n_layers; ++l) {
    for (int sl = 0; sl < kLoraSlots; ++sl) {
      if (const LoraMatrix* m = ads[0]->get(l, LoraSlot(sl)))
        ad_bytes += m->a.bytes() + m->b.bytes();
    }
  }
  std::printf(
      "%d rows, rank %d on q/k/v/o/gate/up/down (%.2f MB of A and B per adapter), "
      "%d threads, %d reps, median ms/step\n",
      rows, rank, double(ad_bytes) / 1e6, threads, reps);
  double base = 0, base_cpu = 0;
  for (size_t c = 0; c < configs.size(); ++c) {
    auto v = ms[c], u = cpu[c];
    std::sort(v.begin(), v.end());
    std::sort(u.begin(), u.end());
    const double med = v[v.size() / 2], med_cpu = u[u.size() / 2];
    if (c == 0) base = med, base_cpu = med_cpu;
    std::printf(
        "adapters %2d: %7.2f ms/step (p10 %.2f, p90 %.2f)  throughput vs none %.3fx"
        "  | cpu %.2f ms/step, vs none %.3fx\n",
        configs[c], med, v[v.size() / 10], v[v.size() * 9 / 10], base / med, med_cpu,
        base_cpu / med_cpu);
  }
  return 0;
}
