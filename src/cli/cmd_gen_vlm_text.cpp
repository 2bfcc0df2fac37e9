// tern gen-vlm-text: the text side of a SmolVLM-shaped pair, from a real
// SmolLM2 GGUF plus SmolVLM's 128 special tokens (vision/vlm_text_writer.h).
#include <cstdio>

#include "commands.h"
#include "tern/vision/vlm_text_writer.h"

namespace tern::cli {

void add_gen_vlm_text_command(CLI::App& app) {
  struct Opts {
    std::string from, out, tokens = "smolvlm";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("gen-vlm-text",
                                 "a SmolVLM-shaped text model: a SmolLM2 GGUF plus SmolVLM's "
                                 "128 special tokens (or the audio projectors' wrapping tokens)");
  cmd->add_option("--from", o->from, "SmolLM2 GGUF (e.g. models/SmolLM2-135M-Instruct.Q4_1.gguf)")
      ->required();
  cmd->add_option("--out", o->out, "output GGUF")->required();
  cmd->add_option("--tokens", o->tokens,
                  "smolvlm: SmolVLM's 128 tokens; audio: <|audio_bos|>, <|audio_eos|> and "
                  "[BEGIN_AUDIO], which qwen2a and voxtral projectors wrap a clip in")
      ->check(CLI::IsMember({"smolvlm", "audio"}))
      ->capture_default_str();
  cmd->callback([o] {
    const int n_vocab = o->tokens == "audio" ? vision::write_text_with_tokens(
                                                   o->from, o->out, vision::audio_wrap_tokens(),
                                                   "audio wrapping tokens")
                                             : vision::write_smolvlm_text(o->from, o->out);
    std::printf("%s: %d tokens, from %s\n", o->out.c_str(), n_vocab, o->from.c_str());
  });
}

}  // namespace tern::cli
