// tern gen-mmproj: writes a seeded random-weight vision projector (mmproj)
// GGUF in llama.cpp's format, tiny or at a real model's shapes, then loads it
// back through the validating loader. For tests and benchmarks without
// downloads; the weights are noise, so the embeddings mean nothing.
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "tern/vision/audio_mmproj_writer.h"
#include "tern/vision/mmproj.h"
#include "tern/vision/mmproj_writer.h"

namespace tern::cli {

namespace {

struct GenMmprojOpts {
  std::string type = "idefics3";
  std::string shape = "tiny";
  std::string weights = "f16";
  std::string out;
  uint32_t seed = 1;
  int n_embd = 0;
  int preproc_size = 0;
  int stack_factor = 0;
};

DType weight_type(const std::string& w) {
  return w == "f32" ? DType::F32 : w == "q8_0" ? DType::Q8_0 : DType::F16;
}

void write_audio(const GenMmprojOpts& o, vision::AudioProjector type) {
  vision::AudioMmprojSpec spec = vision::audio_mmproj_preset(
      type, o.shape == "real" ? vision::MmprojShape::Real : vision::MmprojShape::Tiny);
  spec.matrix_type = weight_type(o.weights);
  spec.seed = o.seed;
  if (o.n_embd > 0) spec.config.d_out = o.n_embd;
  if (o.stack_factor > 0 && type != vision::AudioProjector::Qwen2a)
    spec.config.stack_factor = o.stack_factor;
  vision::write_audio_mmproj(spec, o.out);
  const vision::AudioMmproj mm = vision::AudioMmproj::open(o.out);
  const vision::AudioConfig& c = mm.config();
  std::printf("%s: %s audio, %d mel, %d layers x %d, %d tokens of %d per 30 s (%.1f MB)\n",
              o.out.c_str(), o.type.c_str(), c.n_mel, c.n_layers, c.d_model, c.tokens_per_chunk(),
              c.d_out, double(std::filesystem::file_size(o.out)) / 1e6);
}

}  // namespace

void add_gen_mmproj_command(CLI::App& app) {
  auto o = std::make_shared<GenMmprojOpts>();
  auto* cmd =
      app.add_subcommand("gen-mmproj", "write a random-weight vision or audio projector GGUF");
  cmd->add_option("--type", o->type, "projector type (audio: ultravox, qwen2a, voxtral)")
      ->check(CLI::IsMember({"idefics3", "gemma3", "mlp", "ultravox", "qwen2a", "voxtral"}));
  cmd->add_option("--shape", o->shape,
                  "tiny (unit tests) or real (SmolVLM-256M / Gemma 3 / LLaVA-1.5; audio: "
                  "Whisper-large-v3 with Ultravox v0.5 / Qwen2-Audio / Voxtral Mini heads)")
      ->check(CLI::IsMember({"tiny", "real"}));
  cmd->add_option("--weights", o->weights, "type of the linear weights")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  cmd->add_option("--out", o->out, "output file")->required();
  cmd->add_option("--seed", o->seed, "random seed");
  cmd->add_option("--n-embd", o->n_embd,
                  "projector output width (the text model's n_embd; default: the preset's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--preproc-size", o->preproc_size,
                  "idefics3: the longest edge images are resized to (default: the preset's; "
                  "image_size gives one tile + the global image)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--stack-factor", o->stack_factor,
                  "ultravox, voxtral: frames stacked per token (default: the preset's)")
      ->check(CLI::Range(1, 64));
  cmd->callback([o] {
    if (const auto audio = vision::audio_projector_from_name(o->type))
      return write_audio(*o, *audio);
    const auto type = *vision::projector_from_name(o->type);
    vision::MmprojSpec spec = vision::mmproj_preset(
        type, o->shape == "real" ? vision::MmprojShape::Real : vision::MmprojShape::Tiny);
    spec.matrix_type = weight_type(o->weights);
    spec.seed = o->seed;
    if (o->n_embd > 0) spec.config.d_out = o->n_embd;
    if (o->preproc_size > 0 && type == vision::ProjectorType::Idefics3)
      spec.config.preproc_image_size = o->preproc_size;
    vision::write_mmproj(spec, o->out);
    const vision::Mmproj mm = vision::Mmproj::open(o->out);
    const vision::VisionConfig& c = mm.config();
    std::printf("%s: %s, %dx%d image, %d layers x %d, %d tokens of %d (%.1f MB)\n", o->out.c_str(),
                o->type.c_str(), c.image_size, c.image_size, c.n_layers, c.d_model,
                c.n_output_tokens(), c.d_out, double(std::filesystem::file_size(o->out)) / 1e6);
  });
}

}  // namespace tern::cli
