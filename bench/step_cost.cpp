// step_cost: what one forward pass costs as the scheduler composes it: --rows
// decode tokens (each sequence --ctx deep) plus one prefill chunk of n
// tokens at depth D of a long prompt. Measured directly on the engine (no
// server, no HTTP); each (D, n) is timed --reps times interleaved with a
// decode-only step, and the medians are printed with the chunk's extra cost
// over the decode-only step next to it. This is the data the scheduler's
// step cost model (src/sched/step_budget.h) is fitted to online.
//
// usage: step_cost [-m MODEL] [-t THREADS] [--rows 8] [--ctx 256] [--reps 7]
//                  [--depths 0,1024,2048,3072,4000] [--chunks 1,2,4,8,16,32,64]
// Build: ninja -C build step_cost
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tern/core/log.h"
#include "tern/engine/engine.h"
#include "tern/model/batch.h"

namespace {

using Clock = std::chrono::steady_clock;

// "1,2,4" -> {1, 2, 4}
std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  std::istringstream in(s);
  for (std::string item; std::getline(in, item, ',');) v.push_back(std::stoi(item));
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tern;
  std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  int threads = 2, rows = 8, ctx = 256, reps = 7;
  std::vector<int> depths = {0, 1024, 2048, 3072, 4000};
  std::vector<int> chunks = {1, 2, 4, 8, 16, 32, 64};
  // Options, each with a value: integers, lists, the model path.
  const std::pair<const char*, int*> ints[] = {
      {"-t", &threads}, {"--rows", &rows}, {"--ctx", &ctx}, {"--reps", &reps}};
  const std::pair<const char*, std::vector<int>*> lists[] = {{"--depths", &depths},
                                                             {"--chunks", &chunks}};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    bool known = a == "-m";
    if (known) model = argv[i + 1];
    for (const auto& [name, v] : ints)
      if (a == name) *v = std::atoi(argv[i + 1]), known = true;
    for (const auto& [name, v] : lists)
      if (a == name) *v = parse_list(argv[i + 1]), known = true;
    if (!known) {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  log::init("warn");
  int chunk_sum = 0;
  for (int n : chunks) chunk_sum += n;
  const int max_depth = *std::max_element(depths.begin(), depths.end());
  EngineOptions eo;
  eo.model_path = model;
  eo.n_threads = threads;
  eo.n_ctx = max_depth + 2 * (reps + 2) * chunk_sum * int(depths.size()) + 64;
  eo.max_seqs = rows + 1;
  eo.kv_flash_mb = 0;
  eo.kv_dram_mb = 2048;
  auto engine = Engine::load(eo);
  auto token = [](int seq, int j) { return int32_t(100 + (seq * 31 + j * 7) % 5000); };

  StepOutput out;
  std::vector<SeqId> dec;
  std::vector<std::vector<int32_t>> dec_tok(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    dec.push_back(engine->new_sequence());
    for (int j = 0; j < ctx; ++j) dec_tok[size_t(r)].push_back(token(r, j));
    Batch b;
    b.entries.push_back({dec.back(), dec_tok[size_t(r)], LogitsMode::Last, {}, {}});
    engine->step(b, out);
  }
  const SeqId lng = engine->new_sequence();
  std::vector<int32_t> long_tok;
  int long_len = 0;
  auto grow_long = [&](int to) {  // prefills the long prompt up to depth `to`, 256 at a time
    while (long_len < to) {
      const int n = std::min(256, to - long_len);
      for (int j = 0; j < n; ++j) long_tok.push_back(token(99, long_len + j));
      Batch b;
      b.entries.push_back({lng, {long_tok.data() + long_len, size_t(n)}, LogitsMode::None, {}, {}});
      engine->step(b, out);
      long_len += n;
    }
  };
  int step_no = 0;
  // One step: a decode token for every row (when with_decodes) and n prompt tokens.
  auto step = [&](bool with_decodes, int n) {
    Batch b;
    std::vector<int32_t> dt(static_cast<size_t>(rows));
    if (with_decodes)
      for (int r = 0; r < rows; ++r) {
        dt[size_t(r)] = token(r, ctx + step_no);
        b.entries.push_back({dec[size_t(r)], {&dt[size_t(r)], 1}, LogitsMode::Last, {}, {}});
      }
    for (int j = 0; j < n; ++j) long_tok.push_back(token(99, long_len + j));
    if (n > 0)
      b.entries.push_back({lng, {long_tok.data() + long_len, size_t(n)}, LogitsMode::None, {}, {}});
    const auto t0 = Clock::now();
    engine->step(b, out);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    long_len += n;
    ++step_no;
    return ms;
  };
  for (int w = 0; w < 5; ++w) step(true, 0);  // warm up
  std::printf("%d decode rows %d+ deep, %d threads, median of %d ms\n", rows, ctx, threads, reps);
  std::printf("%6s %5s %9s %9s %9s %10s\n", "depth", "chunk", "decode", "dec+chunk", "extra",
              "chunk alone");
  for (int d : depths) {
    grow_long(d);
    for (int n : chunks) {
      std::vector<double> base, mixed, alone;
      for (int r = 0; r < reps; ++r) {
        base.push_back(step(true, 0));
        mixed.push_back(step(true, n));
        alone.push_back(step(false, n));
      }
      const double b = median(base), m = median(mixed);
      std::printf("%6d %5d %9.2f %9.2f %9.2f %10.2f\n", d, n, b, m, m - b, median(alone));
      std::fflush(stdout);
    }
  }
  return 0;
}
