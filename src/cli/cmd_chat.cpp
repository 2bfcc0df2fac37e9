// tern chat: an interactive chat in the terminal. Each turn re-applies the
// chat template to the whole conversation; the scheduler's prefix cache finds
// the KV of the earlier turns, so only the new turn is computed.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "common.h"
#include "local_generator.h"
#include "tern/tokenizer/chat_template.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::cli {

void add_chat_command(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    SamplingFlags sampling;
    std::string system;
    bool stats = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("chat", "interactive chat in the terminal (/exit, /reset)");
  cmd->add_option("--system", o->system, "system message");
  cmd->add_flag("--stats", o->stats,
                "print each turn's prompt size (and how much came from the cache) and timings "
                "to stderr");
  o->model.add(*cmd);
  o->sampling.n_predict = 512;
  o->sampling.add(*cmd);
  cmd->callback([o] {
    const SamplingParams sp = o->sampling.params();
    auto engine = load_engine(o->model, 1);
    const Tokenizer& tok = engine->tokenizer();
    LocalGenerator gen(*engine);
    std::vector<ChatMessage> msgs;
    if (!o->system.empty()) msgs.push_back({"system", o->system});
    const size_t base = msgs.size();
    std::fprintf(stderr, "chat with %s — /exit to quit, /reset to start over\n",
                 engine->config().name.c_str());
    std::string line;
    for (;;) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
      if (!std::getline(std::cin, line) || line == "/exit" || line == "/quit") break;
      if (line == "/reset") {
        msgs.resize(base);
        continue;
      }
      if (line.empty()) continue;
      msgs.push_back({"user", line});
      auto ids = encode_chat(tok, engine->chat_template(), msgs, /*add_generation_prompt=*/true);
      // The scheduler checks the prompt (one check for every client): a
      // conversation that outgrew the context comes back as an error.
      const LocalResult r = gen.generate(std::move(ids), sp);
      std::fputc('\n', stdout);
      if (o->stats) print_stats(r);
      if (r.finish.reason == sched::FinishReason::Error) {
        std::fprintf(stderr, "error: %s (/reset starts over)\n", r.finish.error.c_str());
        msgs.pop_back();
        continue;
      }
      msgs.push_back({"assistant", r.text});  // a cancelled reply stays as far as it got
    }
  });
}

}  // namespace tern::cli
