#pragma once
// Shared pieces of the CLI commands: model loading with a progress line on
// stderr, and the flags every generating command takes.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "tern/engine/engine.h"
#include "tern/sampling/params.h"

namespace tern::cli {

struct ModelFlags {
  std::string model;  // empty: default model
  int threads = 0;
  int ctx = 4096;
  std::string weights = "auto";  // auto | int4 | int8
  // KV memory hierarchy.
  std::string kv_type = "int8-fp8";
  size_t kv_dram_mb = 1024;
  std::string kv_flash_dir;  // empty: a folder under the system temp directory
  size_t kv_flash_mb = 4096;
  int kv_prefetch_layers = 1;
  size_t kv_staging_mb = 0;
  bool no_prefix_cache = false;
  std::string chat_template;       // a built-in format's name
  std::string chat_template_file;  // a Jinja template replacing the file's
  void add(CLI::App& cmd);
};

struct SamplingFlags {
  int n_predict = 128;
  float temp = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int64_t seed = -1;
  std::vector<std::string> stop;
  void add(CLI::App& cmd);
  SamplingParams params() const;  // validated
};

// Loads the model, printing "loading MODEL ... 100%" on stderr.
// budget: the memory budget the KV cache charges (tern serve), or null.
std::unique_ptr<Engine> load_engine(const ModelFlags& flags, int max_seqs = 8,
                                    MemoryBudget* budget = nullptr);
// A draft model for speculative decoding beside `target` (loaded from
// flags): `path` on the target's task pool, with its context, max_seqs
// sequences and kv_mb of KV DRAM, no flash tier and no prefix cache. Throws
// InvalidArgument naming both files when the vocabularies differ.
std::unique_ptr<Engine> load_draft_engine(const ModelFlags& flags, const std::string& path,
                                          Engine& target, int max_seqs, size_t kv_mb,
                                          MemoryBudget* budget);

}  // namespace tern::cli
