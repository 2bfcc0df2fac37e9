// tern gen-vlm-text: the text side of a SmolVLM-shaped pair, from a real
// SmolLM2 GGUF plus SmolVLM's 128 special tokens (vision/vlm_text_writer.h).
#include <cstdio>

#include "commands.h"
#include "tern/vision/vlm_text_writer.h"

namespace tern::cli {

void add_gen_vlm_text_command(CLI::App& app) {
  auto paths = std::make_shared<std::pair<std::string, std::string>>();  // (from, out)
  auto* cmd = app.add_subcommand("gen-vlm-text",
                                 "a SmolVLM-shaped text model: a SmolLM2 GGUF plus SmolVLM's "
                                 "128 special tokens");
  cmd->add_option("--from", paths->first,
                  "SmolLM2 GGUF (e.g. models/SmolLM2-135M-Instruct.Q4_1.gguf)")
      ->required();
  cmd->add_option("--out", paths->second, "output GGUF")->required();
  cmd->callback([paths] {
    const int n_vocab = vision::write_smolvlm_text(paths->first, paths->second);
    std::printf("%s: %d tokens, from %s\n", paths->second.c_str(), n_vocab, paths->first.c_str());
  });
}

}  // namespace tern::cli
