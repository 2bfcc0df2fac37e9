// tern run: generate a continuation of a prompt, streaming only the text to stdout.
#include <cstdio>

#include "commands.h"
#include "common.h"
#include "local_generator.h"
#include "tern/core/error.h"
#include "tern/tokenizer/chat_template.h"
#include "tern/tokenizer/tokenizer.h"
#include "vision_flags.h"

namespace tern::cli {

void add_run_command(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    SamplingFlags sampling;
    std::string prompt;
    bool chat = false;
    std::string system;
    bool stats = false;
    std::string lora;
    float lora_scale = 1.0f;
    std::string mmproj;
    std::vector<std::string> images;
    std::vector<std::string> audio;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("run", "generate text from a prompt");
  cmd->add_option("-p,--prompt", o->prompt, "the prompt")->required();
  cmd->add_flag("--chat", o->chat, "wrap the prompt as a user message in the chat template");
  cmd->add_option("--system", o->system, "system message (with --chat)");
  cmd->add_flag("--stats", o->stats, "print timings to stderr at the end");
  cmd->add_option("--lora", o->lora, "LoRA adapter GGUF (llama.cpp's adapter format)");
  cmd->add_option("--lora-scale", o->lora_scale, "scale of the adapter's term")
      ->check(CLI::Range(-16.0, 16.0));
  cmd->add_option("--mmproj", o->mmproj,
                  "projector GGUF (llama.cpp mmproj: vision and/or audio) for --image / --audio");
  cmd->add_option("--image", o->images,
                  "image file (PNG, JPEG, BMP, GIF); repeatable; placed at each <__media__> in "
                  "the prompt, else before it");
  cmd->add_option("--audio", o->audio,
                  "audio file (WAV, MP3, FLAC, Ogg); repeatable; placed at each <__audio__> in "
                  "the prompt, else before it");
  o->model.add(*cmd);
  o->sampling.add(*cmd);
  cmd->callback([o] {
    const SamplingParams sp = o->sampling.params();
    auto engine = load_engine(o->model, 1);
    LoraSelection lora;
    if (!o->lora.empty()) lora = {LoraAdapter::load(o->lora, engine->config()), o->lora_scale};
    const Tokenizer& tok = engine->tokenizer();
    if (!o->images.empty() && o->mmproj.empty())
      throw InvalidArgument("--image needs --mmproj (the model's vision projector)");
    if (!o->audio.empty() && o->mmproj.empty())
      throw InvalidArgument("--audio needs --mmproj (the model's audio projector)");
    std::vector<TextSegment> text;
    if (o->chat) {
      std::vector<ChatMessage> msgs;
      if (!o->system.empty()) msgs.push_back({"system", o->system});
      msgs.push_back({"user", o->prompt});
      text = engine->chat_template().segments(msgs, /*add_generation_prompt=*/true);
    } else {
      // With images, special tokens in the prompt are parsed (as llama-mtmd-cli
      // does): a VLM prompt spells its turns, e.g. SmolVLM's <end_of_utterance>.
      text = {{o->prompt, /*parse_special=*/!o->mmproj.empty()}};
    }
    MediaPrompt prompt;
    std::unique_ptr<MediaSide> vision;
    if (!o->mmproj.empty()) {
      vision = std::make_unique<MediaSide>(o->mmproj, *engine);
      std::vector<std::shared_ptr<const vision::Image>> images;
      for (const std::string& path : o->images) images.push_back(load_image_file(path));
      std::vector<std::shared_ptr<const vision::AudioClip>> audio;
      for (const std::string& path : o->audio) audio.push_back(load_audio_file(path));
      prompt = vision->build(text, /*add_bos=*/true, images, audio);
    } else {
      prompt.tokens = o->chat ? tok.encode(text, /*add_bos=*/true)
                              : tok.encode(o->prompt, /*add_bos=*/true, /*parse_special=*/false);
    }
    LocalGenerator gen(*engine);
    const LocalResult r =
        gen.generate(std::move(prompt.tokens), sp, std::move(prompt.media), std::move(lora));
    std::fputc('\n', stdout);
    if (o->stats) print_stats(r);
    if (r.finish.reason == sched::FinishReason::Error) throw Error(r.finish.error);
  });
}

}  // namespace tern::cli
