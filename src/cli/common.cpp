#include "common.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "commands.h"
#include "tern/core/error.h"

namespace tern::cli {

std::string default_model_path() {
  if (const char* env = std::getenv("TERN_MODEL")) return env;
  const std::string name = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  // The binary lives in <repo>/build/; the setup script puts models in <repo>/models/.
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (auto dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
         dir = dir.parent_path()) {
      if (std::filesystem::exists(dir / name)) return (dir / name).string();
    }
  }
  return name;
}

void ModelFlags::add(CLI::App& cmd) {
  cmd.add_option("-m,--model", model, "GGUF model file (default: SmolLM2-135M-Instruct Q4_1)");
  cmd.add_option("-t,--threads", threads, "worker threads (default: one per core)")
      ->check(CLI::Range(0, 1024));
  cmd.add_option("-c,--ctx", ctx, "context length per sequence")->check(CLI::Range(16, 1 << 20));
  cmd.add_option("--weights", weights,
                 "repacked weight format: auto, int4, int8, f16 or bf16 (f16 / bf16: F16, BF16 "
                 "and F32 tensors as 16-bit floats with fp32 activations, F16 and BF16 kept "
                 "exactly, F32 rounded to the one named; quantized tensors as auto)")
      ->check(CLI::IsMember({"auto", "int4", "int8", "f16", "bf16"}));
  cmd.add_option("--kv-type", kv_type,
                 "KV cache layout: int8-fp8 (keys int8, values fp8), int4-fp8, int8 or f16")
      ->check(CLI::IsMember({"f16", "int8", "int8-fp8", "mixed", "int4-fp8"}))
      ->capture_default_str();
  cmd.add_option("--kv-dram-mb", kv_dram_mb, "DRAM budget for KV blocks in MiB")
      ->check(CLI::Range(size_t(1), size_t(1) << 20))
      ->capture_default_str();
  cmd.add_option("--kv-flash-dir", kv_flash_dir,
                 "folder for spilled KV blocks (default: tern-kv under the system temp folder)");
  cmd.add_option("--kv-flash-mb", kv_flash_mb, "spill file budget in MiB (0: no flash tier)")
      ->check(CLI::Range(size_t(0), size_t(1) << 24))
      ->capture_default_str();
  cmd.add_option("--kv-prefetch-layers", kv_prefetch_layers,
                 "layers ahead that spilled KV is read (0: read when needed)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  cmd.add_option("--kv-staging-mb", kv_staging_mb,
                 "part of --kv-dram-mb that buffers spilled blocks streamed into attention "
                 "(bounds how much of live contexts may sit on flash; 0: 1/16 of it)")
      ->check(CLI::Range(size_t(0), size_t(1) << 20))
      ->capture_default_str();
  cmd.add_flag("--no-prefix-cache", no_prefix_cache,
               "never reuse cached KV for a prompt's prefix (to measure what the cache saves)");
  auto* file = cmd.add_option("--chat-template-file", chat_template_file,
                              "Jinja chat template to use instead of the model file's own");
  cmd.add_option("--chat-template", chat_template,
                 "a built-in chat format instead of the model's template: chatml, llama3, gemma, "
                 "llama2 or smolvlm")
      ->check(CLI::IsMember({"chatml", "llama3", "gemma", "llama2", "smolvlm"}))
      ->excludes(file);
}

void SamplingFlags::add(CLI::App& cmd) {
  cmd.add_option("-n,--n-predict", n_predict, "max tokens to generate (-1: until EOS)");
  cmd.add_option("--temp", temp, "temperature (0: greedy)");
  cmd.add_option("--top-k", top_k, "top-k (0: off)");
  cmd.add_option("--top-p", top_p, "top-p (1: off)");
  cmd.add_option("--min-p", min_p, "min-p (0: off)");
  cmd.add_option("--repeat-penalty", repeat_penalty, "repetition penalty (1: off)");
  cmd.add_option("--repeat-last-n", repeat_last_n, "tokens considered by the repetition penalty");
  cmd.add_option("--frequency-penalty", frequency_penalty, "OpenAI frequency penalty");
  cmd.add_option("--presence-penalty", presence_penalty, "OpenAI presence penalty");
  cmd.add_option("-s,--seed", seed, "RNG seed (-1: random)");
  cmd.add_option("--stop", stop, "stop string (repeatable)");
}

SamplingParams SamplingFlags::params() const {
  SamplingParams p;
  p.max_tokens = n_predict;
  p.temperature = temp;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repeat_penalty = repeat_penalty;
  p.repeat_last_n = repeat_last_n;
  p.frequency_penalty = frequency_penalty;
  p.presence_penalty = presence_penalty;
  p.seed = seed < 0 ? kRandomSeed : uint64_t(seed);
  p.stop = stop;
  p.validate();
  return p;
}

std::unique_ptr<Engine> load_engine(const ModelFlags& flags, int max_seqs, MemoryBudget* budget) {
  EngineOptions o;
  o.model_path = flags.model.empty() ? default_model_path() : flags.model;
  o.n_threads = flags.threads;
  o.n_ctx = flags.ctx;
  o.max_seqs = max_seqs;
  if (flags.weights == "int4") o.weights = EngineOptions::Weights::Int4;
  if (flags.weights == "int8") o.weights = EngineOptions::Weights::Int8;
  if (flags.weights == "f16") o.weights = EngineOptions::Weights::F16;
  if (flags.weights == "bf16") o.weights = EngineOptions::Weights::Bf16;
  o.kv_type = kv::parse_kv_type(flags.kv_type);
  o.kv_dram_mb = flags.kv_dram_mb;
  o.kv_flash_dir = flags.kv_flash_dir;
  o.kv_flash_mb = flags.kv_flash_mb;
  o.kv_prefetch_layers = flags.kv_prefetch_layers;
  o.kv_staging_mb = flags.kv_staging_mb;
  o.prefix_reuse = !flags.no_prefix_cache;
  o.chat_template = flags.chat_template;
  o.chat_template_file = flags.chat_template_file;
  o.budget = budget;
  const bool tty = isatty(STDERR_FILENO);
  std::fprintf(stderr, "loading %s ...", o.model_path.c_str());
  auto progress = [&](float f) {
    if (tty) std::fprintf(stderr, "\rloading %s ... %3d%%", o.model_path.c_str(), int(f * 100));
  };
  auto e = Engine::load(o, progress);
  if (tty) {
    std::fprintf(stderr, "\rloading %s ... done\n", o.model_path.c_str());
  } else {
    std::fprintf(stderr, " done\n");
  }
  return e;
}

std::unique_ptr<Engine> load_draft_engine(const ModelFlags& flags, const std::string& path,
                                          Engine& target, int max_seqs, size_t kv_mb,
                                          MemoryBudget* budget) {
  EngineOptions o;
  o.model_path = path;
  o.pool = &target.pool();
  o.n_ctx = target.n_ctx();
  o.max_seqs = max_seqs;
  o.kv_type = kv::parse_kv_type(flags.kv_type);
  o.kv_dram_mb = kv_mb;
  o.kv_flash_mb = 0;
  o.prefix_reuse = false;
  o.budget = budget;
  std::fprintf(stderr, "loading draft model %s ...", path.c_str());
  auto e = Engine::load(o);
  std::fprintf(stderr, " done\n");
  const std::string target_path = flags.model.empty() ? default_model_path() : flags.model;
  if (!e->config().generates())
    throw InvalidArgument("--draft-model " + path + " cannot draft: it is an embedding model (" +
                          e->config().arch + ")");
  if (const std::string why = vocabulary_mismatch(target.tokenizer(), e->tokenizer()); !why.empty())
    throw InvalidArgument("--draft-model " + path + " cannot draft for " + target_path +
                          ": the vocabularies differ (" + why + ")");
  return e;
}

}  // namespace tern::cli
