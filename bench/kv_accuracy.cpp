// kv_accuracy: the accuracy and capacity of each KV type against f16 KV, on a
// real model, through the real engine: one Engine per type
// (EngineOptions::kv_type), so attention reads exactly the blocks the paged
// cache of that type stores. Every engine runs the same token chunks, one
// chunk at a time, and each type is compared with f16 row by row. Reports,
// per type:
//   - perplexity, computed like `tern perplexity` (src/cli/cmd_perplexity.cpp,
//     itself llama-perplexity style): the text is tokenized with the model's
//     BOS policy, cut into chunks of CTX, each chunk (first token set to BOS
//     when the model adds one) evaluated in one pass from an empty sequence,
//     positions CTX/2 .. CTX-2 scored; and its delta against f16,
//   - mean KL divergence KL(f16 || type) of the next-token distributions and
//     top-1 agreement with f16, on the same scored positions (teacher forced),
//   - free-running greedy generation (GEN tokens) from PROMPTS prompts of
//     CTX/4 tokens spread evenly over the text (first token BOS likewise):
//     tokens identical to f16's continuation before the first divergence
//     (mean over prompts), and how many prompts stay identical throughout,
//   - a noise-floor row, "f16/<isa>": f16 KV read by the other attention
//     kernel set (scalar vs AVX2: the same blocks, another summation order),
//     to show how far the agreement columns move for float rounding alone,
//   - KV bytes per token (PagedKv::bytes_per_token) and how many concurrent
//     2048-token sessions fit in 1 GiB of KV DRAM: the frames the allocator
//     really makes of 1 GiB (whole 32-token blocks, 64 per session; with the
//     flash tier on, staging takes dram/16 of it first).
// The prefix cache plays no part: every chunk and prompt starts from an empty
// sequence without attach_prefix(), and the DRAM budget holds everything.
//
// usage: kv_accuracy MODEL.gguf TEXT [TEXT...] [--ctx N] [--gen N] [--prompts N]
//                    [--types noise,int8,int8-fp8,int4-fp8] [--threads N]
// f16 is always run first, as the baseline.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tern/core/log.h"
#include "tern/engine/engine.h"
#include "tern/kv/kv_attend.h"
#include "tern/kv/paged_kv.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {
namespace {

constexpr int kSessionTokens = 2048;
constexpr size_t kGiBMiB = 1024;

// log softmax(logits) into out, in double.
void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  out.resize(logits.size());
  float mx = logits[0];
  for (float v : logits) mx = std::max(mx, v);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(double(v) - mx);
  const double lse = std::log(sum) + mx;
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - lse;
}

int32_t argmax(std::span<const float> x) {
  return int32_t(std::max_element(x.begin(), x.end()) - x.begin());
}

// One KV type: its engine and what it measured.
struct Run {
  kv::KvType type = kv::KvType::F16;
  bool noise = false;  // f16 with the other attention kernels: the noise floor
  std::unique_ptr<Engine> engine;
  double nll = 0.0, kl = 0.0;
  int64_t scored = 0, top1_agree = 0;
  double greedy_run = 0.0;      // summed over prompts
  int greedy_identical = 0;     // prompts identical for all n_gen tokens
  std::vector<int32_t> greedy;  // the current prompt's continuation
};

// Whether name is one of the comma-separated items of list.
bool listed(const std::string& list, const std::string& name) {
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    if (list.compare(start, end - start, name) == 0) return true;
    start = end + 1;
  }
  return false;
}

// Frames of 1 GiB for this type with the flash tier on (defaults otherwise),
// from a real PagedKv (its spill file is created empty and removed).
int64_t frames_with_flash(const ModelConfig& c, kv::KvType t) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("tern-kv-accuracy-" + std::to_string(getpid())))
          .string();
  kv::KvConfig kc;
  kc.n_layers = c.n_layers;
  kc.n_kv_heads = c.n_kv_heads;
  kc.head_dim = c.head_dim;
  kc.type = t;
  kc.dram_bytes = kGiBMiB << 20;
  kc.flash_dir = dir;
  kc.flash_bytes = size_t(4096) << 20;
  int64_t frames = 0;
  {
    kv::PagedKv probe(kc);
    frames = probe.stats().dram_blocks;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return frames;
}

// Greedy continuation of prompt: n_gen tokens, each step feeding the last.
std::vector<int32_t> greedy(Engine& e, const std::vector<int32_t>& prompt, int n_gen) {
  const SeqId s = e.new_sequence();
  StepOutput out;
  Batch b;
  b.entries.push_back({s, prompt, LogitsMode::Last});
  std::vector<int32_t> gen;
  gen.reserve(size_t(n_gen));
  for (;;) {
    e.step(b, out);
    gen.push_back(argmax(out.last(0)));
    if (int(gen.size()) == n_gen) break;
    b.entries[0].tokens = {&gen.back(), 1};
  }
  e.free_sequence(s);
  return gen;
}

int run(int argc, char** argv) {
  std::vector<std::string> texts;
  std::string model_path, only = "noise,int8,int8-fp8,int4-fp8";
  int ctx = 512, n_gen = 64, n_prompts = 8, threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--ctx" && i + 1 < argc)
      ctx = std::stoi(argv[++i]);
    else if (a == "--gen" && i + 1 < argc)
      n_gen = std::stoi(argv[++i]);
    else if (a == "--prompts" && i + 1 < argc)
      n_prompts = std::stoi(argv[++i]);
    else if (a == "--types" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--threads" && i + 1 < argc)
      threads = std::stoi(argv[++i]);
    else if (model_path.empty())
      model_path = a;
    else
      texts.push_back(a);
  }
  if (model_path.empty() || texts.empty() || ctx < 8 || n_gen < 1) {
    std::fprintf(stderr,
                 "usage: kv_accuracy MODEL.gguf TEXT [TEXT...] [--ctx N] [--gen N] [--prompts N]\n"
                 "                   [--types noise,int8,int8-fp8,int4-fp8] [--threads N]\n");
    return 2;
  }
  log::init("warn");

  // f16 first: the baseline every other type is compared with.
  std::vector<Run> runs;
  const kv::KvType types[] = {kv::KvType::F16, kv::KvType::F16, kv::KvType::Int8,
                              kv::KvType::Int8Fp8, kv::KvType::Int4Fp8};
  for (int row = 0; row < 5; ++row) {
    const kv::KvType t = types[row];
    const bool noise = row == 1;
    if (noise ? !listed(only, "noise") : t != kv::KvType::F16 && !listed(only, kv::to_string(t)))
      continue;
    // The noise floor needs a second kernel set for the same f16 blocks.
    const kv::AttendKernels* other = &kv::scalar_attend_kernels();
    if (noise && &kv::active_attend_kernels() == other)
      other = kv::available_attend_kernels().back();
    if (noise && (!other || other == &kv::active_attend_kernels())) {
      std::fprintf(stderr, "kv_accuracy: one attention kernel set only: no noise-floor row\n");
      continue;
    }
    EngineOptions o;
    o.model_path = model_path;
    o.n_threads = threads;
    o.n_ctx = std::max(ctx, ctx / 4 + n_gen);
    o.max_seqs = 1;
    o.kv_type = t;
    o.kv_dram_mb = kGiBMiB;  // also the capacity probe: frames of 1 GiB without flash staging
    o.kv_flash_mb = 0;
    runs.emplace_back();
    runs.back().type = t;
    runs.back().noise = noise;
    runs.back().engine = Engine::load(o);
    if (noise) runs.back().engine->kv().set_kernels(*other);
  }
  Engine& base = *runs.front().engine;
  const Tokenizer& tok = base.tokenizer();
  std::vector<int32_t> ids;
  for (const auto& t : texts) {
    std::ifstream in(t, std::ios::binary);
    if (!in) throw IoError(t + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    const auto part = tok.encode(ss.str(), tok.add_bos_default(), false);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  const int chunks = int(ids.size()) / ctx;
  if (chunks < 1)
    throw InvalidArgument("the text is shorter than one context of " + std::to_string(ctx));
  n_prompts = std::max(1, n_prompts);
  const ModelConfig& c = base.config();
  std::printf(
      "model %s: %d layers, %d kv heads x %d; %zu tokens (BOS %s), %d chunks of %d (positions "
      "%d..%d "
      "scored), %d prompts of %d + %d greedy tokens\n",
      model_path.c_str(), c.n_layers, c.n_kv_heads, c.head_dim, ids.size(),
      tok.add_bos_default() ? "added" : "not added", chunks, ctx, ctx / 2, ctx - 2, n_prompts,
      ctx / 4, n_gen);

  // Teacher forcing: every engine runs each chunk; rows compare with f16's.
  const int first = ctx / 2;
  std::vector<int32_t> chunk(static_cast<size_t>(ctx));
  std::vector<std::vector<double>> ref_lp(size_t(ctx - 1 - first));
  std::vector<int32_t> ref_top1(ref_lp.size());
  std::vector<double> lp;
  StepOutput out;
  for (int ch = 0; ch < chunks; ++ch) {
    std::copy_n(ids.begin() + int64_t(ch) * ctx, ctx, chunk.begin());
    if (tok.add_bos_default()) chunk[0] = tok.bos();
    for (Run& r : runs) {
      Engine& e = *r.engine;
      const SeqId s = e.new_sequence();
      Batch b;
      b.entries.push_back({s, chunk, LogitsMode::All});
      e.step(b, out);
      e.free_sequence(s);
      const bool is_ref = &r == &runs.front();
      for (int p = first; p < ctx - 1; ++p) {
        const size_t k = size_t(p - first);
        std::vector<double>& dst = is_ref ? ref_lp[k] : lp;
        log_softmax(out.row(p), dst);
        r.nll -= dst[size_t(chunk[size_t(p + 1)])];
        const int32_t top1 = argmax(out.row(p));
        if (is_ref) {
          ref_top1[k] = top1;
        } else {
          double kl = 0.0;
          for (size_t i = 0; i < lp.size(); ++i)
            kl += std::exp(ref_lp[k][i]) * (ref_lp[k][i] - lp[i]);
          r.kl += kl;
        }
        r.top1_agree += top1 == ref_top1[k];
        r.scored += 1;
      }
    }
  }

  // Free-running greedy from prompts spread evenly over the text.
  const int64_t stride = (int64_t(ids.size()) - ctx / 4) / n_prompts;
  for (int i = 0; i < n_prompts; ++i) {
    std::vector<int32_t> prompt(ids.begin() + i * stride, ids.begin() + i * stride + ctx / 4);
    if (tok.add_bos_default()) prompt[0] = tok.bos();
    for (Run& r : runs) {
      r.greedy = greedy(*r.engine, prompt, n_gen);
      const auto& f = runs.front().greedy;
      const size_t k = size_t(std::mismatch(r.greedy.begin(), r.greedy.end(), f.begin()).first -
                              r.greedy.begin());
      r.greedy_run += double(k);
      r.greedy_identical += k == r.greedy.size();
    }
  }

  std::printf("\n%-10s %8s %11s %9s %8s %12s %10s %11s %11s %13s\n", "kv type", "B/token",
              "perplexity", "delta", "delta %", "KL vs f16", "top1 agree", "greedy run",
              "identical", "2048-tok/GiB");
  const double ppl0 = std::exp(runs.front().nll / double(runs.front().scored));
  for (const Run& r : runs) {
    const double ppl = std::exp(r.nll / double(r.scored));
    const kv::KvStats st = r.engine->kv().stats();
    const int64_t blocks_per_session = (kSessionTokens + st.block_tokens - 1) / st.block_tokens;
    const int64_t sessions = st.dram_blocks / blocks_per_session;
    const int64_t sessions_flash = frames_with_flash(c, r.type) / blocks_per_session;
    char cap[48];
    std::snprintf(cap, sizeof cap, "%lld (%lld)", (long long)sessions, (long long)sessions_flash);
    const std::string name =
        r.noise ? std::string("f16/") + r.engine->kv().kernel_isa() : kv::to_string(r.type);
    std::printf("%-10s %8zu %11.4f %+9.4f %+7.2f%% %12.6f %9.2f%% %11.1f %7d/%-3d %13s\n",
                name.c_str(), r.engine->kv().bytes_per_token(), ppl, ppl - ppl0,
                100.0 * (ppl - ppl0) / ppl0, r.kl / double(r.scored),
                100.0 * double(r.top1_agree) / double(r.scored), r.greedy_run / double(n_prompts),
                r.greedy_identical, n_prompts, cap);
  }
  std::printf(
      "\ngreedy run: tokens identical to f16 before the first divergence (mean of %d, max %d);\n"
      "2048-tok/GiB: concurrent %d-token sessions in 1 GiB of KV DRAM, flash tier off (on)\n",
      n_prompts, n_gen, kSessionTokens);
  if (runs.size() > 1 && runs[1].noise) {
    const char* isa = runs[1].engine->kv().kernel_isa();
    std::printf(
        "f16/%s: the same f16 blocks read by the %s attention kernels instead of %s, a\n"
        "perturbation of float rounding only: the noise floor of the agreement columns\n",
        isa, isa, base.kv().kernel_isa());
  }
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  try {
    return tern::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kv_accuracy: %s\n", e.what());
    return 1;
  }
}
