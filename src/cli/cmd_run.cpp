// tern run: generate a continuation of a prompt, streaming only the text to stdout.
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "tern/engine/generate.h"
#include "tern/tokenizer/chat_template.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::cli {

void add_run_command(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    SamplingFlags sampling;
    std::string prompt;
    bool chat = false;
    std::string system;
    bool stats = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "generate text from a prompt");
  cmd->add_option("-p,--prompt", o->prompt, "the prompt")->required();
  cmd->add_flag("--chat", o->chat, "wrap the prompt as a user message in the chat template");
  cmd->add_option("--system", o->system, "system message (with --chat)");
  cmd->add_flag("--stats", o->stats, "print timings to stderr at the end");
  o->model.add(*cmd);
  o->sampling.add(*cmd);
  cmd->callback([o] {
    const SamplingParams sp = o->sampling.params();
    auto engine = load_engine(o->model, 1);
    const Tokenizer& tok = engine->tokenizer();
    std::vector<int32_t> ids;
    if (o->chat) {
      std::vector<ChatMessage> msgs;
      if (!o->system.empty()) msgs.push_back({"system", o->system});
      msgs.push_back({"user", o->prompt});
      ids = encode_chat(tok, engine->chat_template(), msgs, /*add_generation_prompt=*/true);
    } else {
      ids = tok.encode(o->prompt, /*add_bos=*/true, /*parse_special=*/false);
    }
    GenerateOptions g;
    g.sampling = sp;
    g.on_text = [](std::string_view s) {
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fflush(stdout);
      return true;
    };
    const GenerationResult r = generate(*engine, ids, g);
    std::fputc('\n', stdout);
    if (o->stats) {
      const int n = int(r.tokens.size());
      std::fprintf(stderr,
                   "prompt: %d tokens in %.1f ms (%.1f t/s); generated %d tokens in %.1f ms "
                   "(%.1f t/s); finish: %s; seed %llu\n",
                   r.prompt_tokens, r.prompt_ms, r.prompt_tokens * 1000.0 / r.prompt_ms, n,
                   r.generate_ms, n > 1 ? (n - 1) * 1000.0 / r.generate_ms : 0.0,
                   finish_reason_name(r.finish), (unsigned long long)r.seed);
    }
  });
}

}  // namespace tern::cli
