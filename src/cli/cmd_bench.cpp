// tern bench: prefill, decode and batched-decode throughput, like llama-bench;
// with --depth, decode speed from deep in a context instead, with the KV
// cache's counters (DRAM/flash placement, spills, prefetch stalls) and the
// greedy tokens, so KV configurations can be compared on speed and output.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cinttypes>
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
#include "tern/kv/paged_kv.h"
#include "tern/model/lora.h"
#include "tern/model/model.h"

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

// `batch` sequences decode `tg` tokens each, one batched forward pass per step;
// with adapters given, sequence i runs with adapters[i % size] (the rows of a
// multi-LoRA batch, each adapter's low-rank terms beside the base weights).
double run_decode(Engine& e, int tg, int batch_size, std::span<const LoraSelection> adapters) {
  const auto toks = bench_tokens(tg * batch_size + 1, e.n_vocab());
  std::vector<SeqId> seqs;
  for (int i = 0; i < batch_size; ++i) seqs.push_back(e.new_sequence());
  StepOutput out;
  Batch batch;
  batch.entries.resize(size_t(batch_size));
  // One warm-up token per sequence (not timed): the first step sizes buffers.
  for (int i = 0; i < batch_size; ++i) {
    batch.entries[size_t(i)] = {seqs[size_t(i)], {&toks[size_t(i)], 1}, LogitsMode::Last};
    if (!adapters.empty()) batch.entries[size_t(i)].lora = adapters[size_t(i) % adapters.size()];
  }
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

// --- Context-depth decode (--depth) ---------------------------------------

struct DepthOpts {
  int depth = 0;  // context tokens prefilled per sequence
  int tg = 0;     // timed decode steps
  int pp = 0;     // > 0: then this many more prompt tokens, timed (prefill at depth)
  int batch = 1;  // sequences decoded together
  int chunk = 512;
  int pp_chunk = 512;       // chunk of the timed prefill at depth (small: a server's chunks)
  bool drop_cache = false;  // drop the spill file's page cache before each decode step
};

struct DepthRun {
  double prefill_s = 0;
  double pp_s = 0;      // the timed prefill of pp tokens on top of the depth (all sequences)
  double decode_s = 0;  // the tg timed steps only (page-cache drops excluded)
  std::vector<double> step_ms;                  // each timed step
  std::vector<std::vector<int32_t>> greedy;     // per sequence: tg + 2 argmax tokens
  kv::KvStats start, prefilled, before, after;  // before prefill / after it / timed decode
};

// Index of the largest logit (the first one on ties).
int32_t argmax(std::span<const float> row) {
  size_t best = 0;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] > row[best]) best = i;
  }
  return int32_t(best);
}

// FNV-1a over the token ids of every sequence: one number to compare outputs by.
uint64_t fnv1a(const std::vector<std::vector<int32_t>>& seqs) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& s : seqs) {
    for (int32_t t : s) {
      for (int b = 0; b < 4; ++b) h = (h ^ ((uint32_t(t) >> (8 * b)) & 0xffu)) * 1099511628211ull;
    }
  }
  return h;
}

// Writes back and drops this process's spill files from the page cache, so the
// next reads go to the device (kv_bench does the same). The files are named
// tern-kv-<pid>-<n>.blocks (kv/flash_store.cpp).
void drop_spill_cache(const std::string& dir) {
  const std::string prefix = "tern-kv-" + std::to_string(getpid()) + "-";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind(prefix, 0) != 0) continue;
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// `batch` sequences each prefill `depth` pseudo-random tokens (chunked, one
// sequence at a time) and, with pp, pp more tokens timed (prefill at depth, as
// llama-bench -p PP -d DEPTH measures it); then decode greedily: the prompt's
// argmax is fed back, one untimed warm-up step, then tg timed steps of one
// token per sequence.
DepthRun run_depth(Engine& e, const DepthOpts& o) {
  const kv::PagedKv& kv = e.kv();
  const int per_seq = o.depth + o.pp;
  const auto toks = bench_tokens(per_seq * o.batch, e.n_vocab());
  const bool flash = !kv.config().flash_dir.empty() && kv.config().flash_bytes > 0;
  DepthRun r;
  std::vector<SeqId> seqs;
  StepOutput out;
  Batch batch;
  auto check = [&](SeqId s) {
    if (!kv.failure(s).empty()) throw Error("depth test: sequence failed: " + kv.failure(s));
  };
  r.start = kv.stats();
  const auto t0 = Clock::now();
  for (int i = 0; i < o.batch; ++i) {
    const SeqId s = seqs.emplace_back(e.new_sequence());
    const auto prompt =
        std::span<const int32_t>(toks).subspan(size_t(i) * size_t(per_seq), size_t(per_seq));
    auto prefill = [&](int from, int to, int chunk) {
      for (int b = from; b < to; b += chunk) {
        const int n = std::min(chunk, to - b);
        batch.entries = {{s, prompt.subspan(size_t(b), size_t(n)),
                          b + n == per_seq ? LogitsMode::Last : LogitsMode::None}};
        e.step(batch, out);
        check(s);
      }
    };
    prefill(0, o.depth, o.chunk);
    if (o.pp > 0) {
      const auto p0 = Clock::now();
      prefill(o.depth, per_seq, o.pp_chunk);
      r.pp_s += seconds_since(p0);
    }
    r.greedy.push_back({argmax(out.last(0))});
  }
  r.prefill_s = seconds_since(t0);
  r.prefilled = kv.stats();
  batch.entries.resize(size_t(o.batch));
  auto decode_step = [&] {
    for (int i = 0; i < o.batch; ++i) {
      batch.entries[size_t(i)] = {
          seqs[size_t(i)], {&r.greedy[size_t(i)].back(), 1}, LogitsMode::Last};
    }
    if (o.drop_cache && flash) drop_spill_cache(kv.config().flash_dir);
    const auto s0 = Clock::now();
    e.step(batch, out);
    const double sec = seconds_since(s0);
    for (int i = 0; i < o.batch; ++i) {
      check(seqs[size_t(i)]);
      r.greedy[size_t(i)].push_back(argmax(out.last(i)));
    }
    return sec;
  };
  decode_step();  // warm-up: not timed
  r.before = kv.stats();
  for (int t = 0; t < o.tg; ++t) {
    const double sec = decode_step();
    r.decode_s += sec;
    r.step_ms.push_back(sec * 1e3);
  }
  r.after = kv.stats();
  for (SeqId s : seqs) e.free_sequence(s);
  return r;
}

// Flash staging as PagedKv sizes it (kv/paged_kv.cpp): bytes, and how many
// blocks of live sequences it lets stream from flash.
std::pair<size_t, int64_t> staging_of(const kv::PagedKv& kv) {
  const kv::KvConfig& c = kv.config();
  if (c.flash_dir.empty() || c.flash_bytes == 0) return {0, 0};
  const size_t sets = size_t(std::min(c.prefetch_layers + 1, c.n_layers));
  const size_t want = c.staging_bytes ? c.staging_bytes : c.dram_bytes / 16;
  const int64_t cap = std::max<int64_t>(1, int64_t(want / (sets * kv.layout().slice_bytes)));
  return {size_t(cap) * sets * kv.layout().slice_bytes, cap};
}

nlohmann::json kv_config_json(const kv::PagedKv& kv) {
  const kv::KvConfig& c = kv.config();
  const kv::KvStats st = kv.stats();
  const auto [staging, cap] = staging_of(kv);
  const bool flash = !c.flash_dir.empty() && c.flash_bytes > 0;
  return {{"type", kv::to_string(c.type)},
          {"bytes_per_token", st.bytes_per_token},
          {"block_tokens", st.block_tokens},
          {"block_bytes", st.block_bytes},
          {"slice_bytes", kv.layout().slice_bytes},
          {"n_layers", c.n_layers},
          {"dram_mib", double(c.dram_bytes) / (1 << 20)},
          {"dram_blocks", st.dram_blocks},
          {"flash", flash},
          {"flash_dir", flash ? c.flash_dir : std::string()},
          {"flash_mib", double(c.flash_bytes) / (1 << 20)},
          {"flash_blocks", st.flash_blocks},
          {"prefetch_layers", c.prefetch_layers},
          {"staging_bytes", staging},
          {"stream_capacity_blocks", cap}};
}

// The counters of one depth run: placement after the decode, flash traffic
// during the prefill and during the timed decode.
nlohmann::json depth_kv_json(const DepthRun& r) {
  const kv::KvStats &a = r.after, &b = r.before, &p = r.prefilled, &s = r.start;
  return {{"dram_used_blocks", a.dram_used},
          {"dram_free_blocks", a.dram_free},
          {"dram_cached_blocks", a.dram_cached},
          {"flash_live_blocks", a.flash_live},
          {"flash_used_blocks", a.flash_used},
          {"prefill_blocks_spilled", p.blocks_spilled - s.blocks_spilled},
          {"prefill_bytes_prefetched", p.bytes_prefetched - s.bytes_prefetched},
          {"prefill_prefetch_stall_ms", p.prefetch_stall_ms - s.prefetch_stall_ms},
          {"decode_blocks_spilled", a.blocks_spilled - b.blocks_spilled},
          {"decode_bytes_spilled", a.bytes_spilled - b.bytes_spilled},
          {"decode_bytes_prefetched", a.bytes_prefetched - b.bytes_prefetched},
          {"decode_bytes_reloaded", a.bytes_reloaded - b.bytes_reloaded},
          {"decode_prefetch_stalls", a.prefetch_stalls - b.prefetch_stalls},
          {"decode_prefetch_stall_ms", a.prefetch_stall_ms - b.prefetch_stall_ms},
          {"read_errors", a.read_errors},
          {"write_errors", a.write_errors}};
}

// Runs the depth test `reps` times for one batch size; returns its JSON and
// prints its text lines unless json. Later repetitions start with the earlier
// ones' blocks in the prefix cache (never attached, but evicting them writes
// them to flash when the tier is on): for equal conditions across KV
// configurations, run one repetition per process (bench/kv_flash.py does).
nlohmann::json depth_test(Engine& e, const DepthOpts& o, int reps, bool json) {
  const kv::PagedKv& kv = e.kv();
  std::vector<DepthRun> runs;
  for (int r = 0; r < reps; ++r) {
    try {
      runs.push_back(run_depth(e, o));
    } catch (const kv::KvFullError& full) {
      const auto [staging, cap] = staging_of(kv);
      throw kv::KvFullError(std::string(full.what()) + " (depth test: the DRAM arena holds " +
                            std::to_string(kv.stats().dram_blocks) +
                            " blocks and flash staging lets " + std::to_string(cap) +
                            " more stream; raise --kv-dram-mb or --kv-staging-mb)");
    }
  }
  size_t best = 0;
  nlohmann::json tps_all = nlohmann::json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    tps_all.push_back(double(o.tg) * o.batch / runs[i].decode_s);
    if (runs[i].decode_s < runs[best].decode_s) best = i;
  }
  const DepthRun& r = runs[best];
  bool same = true;
  for (const DepthRun& x : runs) same = same && x.greedy == r.greedy;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016" PRIx64, fnv1a(r.greedy));
  const double tps = double(o.tg) * o.batch / r.decode_s;
  double pp_s = 0;  // the best repetition's prefill at depth
  for (const DepthRun& x : runs)
    if (pp_s == 0 || x.pp_s < pp_s) pp_s = x.pp_s;
  const double pp_tps = o.pp > 0 ? double(o.pp) * o.batch / pp_s : 0.0;
  // The median step resists bursts of load on a shared machine better than the mean.
  std::vector<double> ms = r.step_ms;
  std::sort(ms.begin(), ms.end());
  nlohmann::json j = {{"batch", o.batch},
                      {"depth", o.depth},
                      {"tokens", o.tg},
                      {"tokens_per_s", tps},
                      {"ms_per_step", r.decode_s / o.tg * 1e3},
                      {"step_ms_min", ms.front()},
                      {"step_ms_median", ms[ms.size() / 2]},
                      {"reps_tokens_per_s", tps_all},
                      {"prefill_s", r.prefill_s},
                      {"page_cache_dropped", o.drop_cache},
                      {"greedy_fnv1a", hash},
                      {"greedy_same_across_reps", same},
                      {"greedy_tokens", r.greedy},
                      {"kv", depth_kv_json(r)}};
  if (o.pp > 0) {
    j["pp"] = o.pp;
    j["pp_tokens_per_s"] = pp_tps;
  }
  if (!json) {
    if (o.pp > 0)
      std::printf("depth    d%-5d pp%-4d batch %-3d %8.1f t/s  (prefill at depth)\n", o.depth, o.pp,
                  o.batch, pp_tps);
    const auto& k = j["kv"];
    const int64_t dram = k["dram_used_blocks"], streamed = k["flash_live_blocks"];
    std::printf(
        "depth    d%-5d tg%-4d batch %-3d %8.1f t/s  (ms/step: mean %.2f, median %.2f, min %.2f; "
        "prefill %.1f s)\n",
        o.depth, o.tg, o.batch, tps, r.decode_s / o.tg * 1e3, ms[ms.size() / 2], ms.front(),
        r.prefill_s);
    std::printf(
        "  kv: %" PRId64 " blocks in DRAM, %" PRId64
        " streamed from flash (%.0f%%); spilled %" PRId64 " in prefill, %" PRId64
        " in decode; decode read %.1f MiB, %" PRId64 " stalls (%.1f ms)%s\n",
        dram, streamed, 100.0 * double(streamed) / double(std::max<int64_t>(1, dram + streamed)),
        k["prefill_blocks_spilled"].get<int64_t>(), k["decode_blocks_spilled"].get<int64_t>(),
        k["decode_bytes_prefetched"].get<double>() / (1 << 20),
        k["decode_prefetch_stalls"].get<int64_t>(), k["decode_prefetch_stall_ms"].get<double>(),
        o.drop_cache ? ", page cache dropped" : "");
    std::printf("  greedy: fnv1a %s%s, first:", hash, same ? "" : " (DIFFERS across reps)");
    for (size_t t = 0; t < std::min<size_t>(8, r.greedy[0].size()); ++t)
      std::printf(" %d", r.greedy[0][t]);
    std::printf("\n");
  }
  return j;
}

struct BenchOpts {
  ModelFlags model;
  int pp = 512;
  int tg = 128;
  std::vector<int> batches{1, 4, 16};
  int reps = 3;
  int chunk = 512;
  int pp_chunk = 0;  // 0: --chunk
  bool json = false;
  int depth = 0;  // > 0: the depth test replaces the others
  bool drop_cache = false;
  bool pp_at_depth = false;        // --pp given with --depth: also time the prefill at depth
  std::vector<std::string> loras;  // decode test: sequence i runs with adapter i % size
};

// The depth test for each batch size, with the KV configuration as printed.
void run_depth_tests(Engine& e, const BenchOpts& o, nlohmann::json& j) {
  if (o.tg < 1) throw InvalidArgument("--depth needs --tg of at least 1");
  const kv::KvConfig& c = e.kv().config();
  j["kv"] = kv_config_json(e.kv());
  if (!o.json) {
    const auto& k = j["kv"];
    std::printf("KV %s, %" PRId64 " B/token, %" PRId64
                "-token blocks of %.1f KiB; DRAM arena %" PRId64 " blocks (%.1f of %.0f MiB)",
                kv::to_string(c.type), k["bytes_per_token"].get<int64_t>(),
                k["block_tokens"].get<int64_t>(), k["block_bytes"].get<double>() / 1024,
                k["dram_blocks"].get<int64_t>(),
                k["dram_blocks"].get<double>() * k["block_bytes"].get<double>() / (1 << 20),
                k["dram_mib"].get<double>());
    if (k["flash"].get<bool>()) {
      std::printf(
          "; flash %s (%.0f MiB), prefetch %d, staging %.2f MiB (streams up to %" PRId64 " blocks)",
          c.flash_dir.c_str(), k["flash_mib"].get<double>(), c.prefetch_layers,
          k["staging_bytes"].get<double>() / (1 << 20), k["stream_capacity_blocks"].get<int64_t>());
    } else {
      std::printf("; no flash tier");
    }
    std::printf("\n");
  }
  for (int b : o.batches) {
    const DepthOpts d{o.depth,     o.tg,    o.pp_at_depth ? o.pp : 0,
                      b,           o.chunk, o.pp_chunk > 0 ? o.pp_chunk : o.chunk,
                      o.drop_cache};
    j["depth"].push_back(depth_test(e, d, o.reps, o.json));
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOpts>();
  auto* cmd = app.add_subcommand("bench", "measure prefill / decode / batched decode tokens/s");
  o->model.add(*cmd);
  cmd->add_option("--pp", o->pp, "prompt tokens for the prefill test (0: skip)");
  cmd->add_option("--tg", o->tg, "generated tokens per sequence for decode tests (0: skip)");
  cmd->add_option("--batch", o->batches, "batch sizes for decode (repeatable or comma list)")
      ->delimiter(',');
  cmd->add_option("-r,--reps", o->reps, "repetitions (best is reported)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--chunk", o->chunk, "prefill tokens per forward pass")
      ->check(CLI::Range(1, 8192));
  cmd->add_option("--pp-chunk", o->pp_chunk,
                  "depth test: tokens per forward pass of the timed --pp at depth (default "
                  "--chunk; small chunks are what a server's steps give a long prompt)")
      ->check(CLI::Range(1, 8192));
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->add_option(
         "--depth", o->depth,
         "instead of the tests above: prefill this many tokens per sequence, then time --tg "
         "greedy decode steps from there, with KV placement and flash counters; with --pp "
         "given, also time the prefill of --pp more tokens at that depth")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--lora", o->loras,
                  "decode test: LoRA adapter files (repeatable or comma list); sequence i of a "
                  "batch runs with adapter i % count, at scale 1")
      ->delimiter(',')
      ->check(CLI::ExistingFile);
  cmd->add_flag("--drop-cache", o->drop_cache,
                "depth test: drop the spill file from the page cache before every decode step");
  cmd->callback([o, cmd] {
    if (!o->loras.empty() && o->depth > 0) {
      throw InvalidArgument("--lora applies to the decode test, not to --depth");
    }
    o->pp_at_depth = o->depth > 0 && cmd->count("--pp") > 0 && o->pp > 0;
    int max_b = 1;
    for (int b : o->batches) max_b = std::max(max_b, b);
    // The depth test needs room for the context, the warm-up token and --tg.
    const int need_ctx = o->depth + (o->pp_at_depth ? o->pp : 0) + o->tg + 1;
    if (o->depth > 0) o->model.ctx = std::max(o->model.ctx, need_ctx);
    const auto t_load = Clock::now();
    auto engine = load_engine(o->model, max_b);
    const double load_s = seconds_since(t_load);
    if (o->depth > 0 && engine->n_ctx() < need_ctx) {
      throw InvalidArgument("--depth " + std::to_string(o->depth) + " + --tg " +
                            std::to_string(o->tg) + " + 1 tokens exceed the model's context of " +
                            std::to_string(engine->n_ctx()));
    }
    const ModelConfig& c = engine->config();
    std::vector<LoraSelection> adapters;
    for (const std::string& f : o->loras) adapters.push_back({LoraAdapter::load(f, c), 1.0f});
    nlohmann::json j;
    j["model"] = c.name;
    j["threads"] = engine->pool().size();
    j["kernels"] = kernels::kernel_isa();
    j["load_s"] = load_s;
    j["dispatch_us"] = dispatch_us(engine->pool());
    j["lora_adapters"] = o->loras.size();
    // Decode reads every repacked weight once per step; prefill's work is the
    // linear layers' multiply-accumulates (the output head runs once per prompt).
    const double layer_macs =
        double(c.n_layers) *
        (2.0 * c.d_model * c.q_dim() + 2.0 * c.d_model * c.kv_dim() + 3.0 * c.d_model * c.d_ff);
    j["weight_bytes"] = engine->model().packed_bytes();
    j["layer_macs_per_token"] = layer_macs;
    j["head_macs_per_token"] = double(c.d_model) * c.n_vocab;
    if (!o->json) {
      std::printf("load %.2f s, dispatch-and-join %.2f us, %.1f MiB of weights\n", load_s,
                  j["dispatch_us"].get<double>(),
                  double(engine->model().packed_bytes()) / (1 << 20));
    }
    auto best = [&](auto fn) {
      double b = 0;
      for (int r = 0; r < o->reps; ++r) b = std::max(b, fn());
      return b;
    };
    if (o->depth > 0) {
      run_depth_tests(*engine, *o, j);
    } else if (o->pp > 0) {
      const double tps = best([&] { return run_prefill(*engine, o->pp, o->chunk); });
      j["prefill"] = {{"tokens", o->pp}, {"tokens_per_s", tps}};
      if (!o->json) std::printf("prefill  pp%-5d %10.1f t/s\n", o->pp, tps);
    }
    if (o->depth == 0 && o->tg > 0) {
      for (int b : o->batches) {
        const double tps = best([&] { return run_decode(*engine, o->tg, b, adapters); });
        j["decode"].push_back({{"batch", b}, {"tokens", o->tg}, {"tokens_per_s", tps}});
        if (!o->json) {
          std::printf("decode   tg%-4d batch %-3d %8.1f t/s", o->tg, b, tps);
          if (!adapters.empty())
            std::printf("  (%zu LoRA adapters, row i on adapter i %% %zu)", adapters.size(),
                        adapters.size());
          std::printf("\n");
        }
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
