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
#include "vision_flags.h"

namespace tern::cli {

void add_chat_command(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    SamplingFlags sampling;
    std::string system;
    bool stats = false;
    std::string mmproj;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "chat", "interactive chat in the terminal (/exit, /reset, /image PATH with --mmproj)");
  cmd->add_option("--mmproj", o->mmproj, "vision projector GGUF: /image PATH adds an image");
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
    std::unique_ptr<MediaSide> vision;
    if (!o->mmproj.empty()) vision = std::make_unique<MediaSide>(o->mmproj, *engine);
    // Images of the conversation, in order: each user turn that added some
    // carries one marker per image at the start of its text.
    std::vector<std::shared_ptr<const vision::Image>> images, pending;
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
        images.clear();
        pending.clear();
        continue;
      }
      if (line.rfind("/image", 0) == 0) {
        const std::string path = line.size() > 7 ? line.substr(7) : "";
        try {
          if (!vision) throw InvalidArgument("/image needs tern chat --mmproj FILE");
          if (path.empty()) throw InvalidArgument("usage: /image PATH");
          pending.push_back(load_image_file(path));
          std::fprintf(stderr, "image %s added to the next message\n", path.c_str());
        } catch (const std::exception& e) {
          std::fprintf(stderr, "error: %s\n", e.what());
        }
        continue;
      }
      if (line.empty()) continue;
      std::string content;
      for (size_t i = 0; i < pending.size(); ++i) content += kMediaMarker;
      msgs.push_back({"user", content + line});
      const size_t n_before = images.size();
      images.insert(images.end(), pending.begin(), pending.end());
      pending.clear();
      MediaPrompt prompt;
      try {
        const auto segs = engine->chat_template().segments(msgs, /*add_generation_prompt=*/true);
        if (vision)
          prompt = vision->build(segs, /*add_bos=*/true, images);
        else
          prompt.tokens = tok.encode(segs, /*add_bos=*/true);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        msgs.pop_back();
        images.resize(n_before);
        continue;
      }
      // The scheduler checks the prompt (one check for every client): a
      // conversation that outgrew the context comes back as an error.
      const LocalResult r = gen.generate(std::move(prompt.tokens), sp, std::move(prompt.media));
      std::fputc('\n', stdout);
      if (o->stats) print_stats(r);
      if (r.finish.reason == sched::FinishReason::Error) {
        std::fprintf(stderr, "error: %s (/reset starts over)\n", r.finish.error.c_str());
        msgs.pop_back();
        images.resize(n_before);
        continue;
      }
      msgs.push_back({"assistant", r.text});  // a cancelled reply stays as far as it got
    }
  });
}

}  // namespace tern::cli
