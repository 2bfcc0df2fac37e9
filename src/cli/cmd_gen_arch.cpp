// tern gen-arch-model: writes a seeded random-weight GGUF of one architecture
// (small shapes, the real tensor names and metadata, SmolLM2's tokenizer
// copied in so llama.cpp loads it). The architecture oracle's files:
// scripts/gen_arch_golden.py runs llama.cpp on them.
#include <cstdio>
#include <filesystem>
#include <optional>

#include "commands.h"
#include "tern/gguf/gguf.h"
#include "tern/model/gen_arch.h"
#include "tern/model/quantize_model.h"

namespace tern::cli {

void add_gen_arch_command(CLI::App& app) {
  struct Opts {
    std::string arch;
    uint64_t seed = 1;
    std::string tokenizer;
    std::string out;
    std::string weights = "q8_0";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      app.add_subcommand("gen-arch-model", "write a random-weight model of an architecture");
  cmd->add_option("--weights", o->weights,
                  "linear layers' GGUF type (default q8_0): " + quantize_type_names());
  cmd->add_option("--arch", o->arch, "architecture case")->required()->check(CLI::IsMember([] {
    auto all = gen_arch_cases(true);
    for (auto& c : gen_encoder_cases()) all.push_back(c);
    return all;
  }()));
  cmd->add_option("--seed", o->seed, "random seed");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "GGUF to copy the tokenizer from (default: the default model)");
  cmd->add_option("--out", o->out, "output file")->required();
  cmd->callback([o] {
    std::optional<gguf::GgufFile> tok;  // the encoders write their own vocabulary
    if (!gen_arch_own_vocab(o->arch))
      tok = gguf::GgufFile::open(o->tokenizer.empty() ? default_model_path() : o->tokenizer);
    const DType wt = parse_quantize_type(o->weights);
    const GenArchResult r = generate_arch_model(o->arch, o->seed, tok ? &*tok : nullptr, wt);
    r.writer.write(o->out);
    std::printf("%s: %s seed %llu, weights sha256 %s (%.1f MB)\n", o->out.c_str(), o->arch.c_str(),
                (unsigned long long)o->seed, r.weights_sha256.c_str(),
                double(std::filesystem::file_size(o->out)) / 1e6);
  });
}

void add_gen_lora_command(CLI::App& app) {
  struct Opts {
    std::string base, out;
    GenLoraOptions gen;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "gen-lora", "write a random LoRA adapter (llama.cpp's GGUF format) for a base model");
  cmd->add_option("--base", o->base, "base model GGUF (default: the default model)");
  cmd->add_option("--rank", o->gen.rank, "rank of A and B")->check(CLI::Range(1, kMaxLoraRank));
  cmd->add_option("--seed", o->gen.seed, "random seed");
  cmd->add_option("--alpha", o->gen.alpha, "adapter.lora.alpha (default 2 * rank)");
  cmd->add_option("--strength", o->gen.strength,
                  "RMS of the low-rank term relative to the base layer's output");
  cmd->add_option("--out", o->out, "output file")->required();
  cmd->callback([o] {
    const gguf::GgufFile base =
        gguf::GgufFile::open(o->base.empty() ? default_model_path() : o->base);
    const GenArchResult r = generate_lora(base, o->gen);
    r.writer.write(o->out);
    std::printf("%s: rank %d on q/k/v/o/gate/up/down, seed %llu, sha256 %s (%.1f MB)\n",
                o->out.c_str(), o->gen.rank, (unsigned long long)o->gen.seed,
                r.weights_sha256.c_str(), double(std::filesystem::file_size(o->out)) / 1e6);
  });
}

}  // namespace tern::cli
