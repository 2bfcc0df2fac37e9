// tern gen-mmproj: writes a seeded random-weight vision projector (mmproj)
// GGUF in llama.cpp's format, tiny or at a real model's shapes, then loads it
// back through the validating loader. For tests and benchmarks without
// downloads; the weights are noise, so the embeddings mean nothing.
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "tern/vision/mmproj.h"
#include "tern/vision/mmproj_writer.h"

namespace tern::cli {

void add_gen_mmproj_command(CLI::App& app) {
  struct Opts {
    std::string type = "idefics3";
    std::string shape = "tiny";
    std::string weights = "f16";
    std::string out;
    uint32_t seed = 1;
    int n_embd = 0;
    int preproc_size = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("gen-mmproj", "write a random-weight vision projector GGUF");
  cmd->add_option("--type", o->type, "projector type")
      ->check(CLI::IsMember({"idefics3", "gemma3", "mlp"}));
  cmd->add_option("--shape", o->shape,
                  "tiny (unit tests) or real (SmolVLM-256M / Gemma 3 / LLaVA-1.5)")
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
  cmd->callback([o] {
    const auto type = *vision::projector_from_name(o->type);
    vision::MmprojSpec spec = vision::mmproj_preset(
        type, o->shape == "real" ? vision::MmprojShape::Real : vision::MmprojShape::Tiny);
    spec.matrix_type = o->weights == "f32"    ? DType::F32
                       : o->weights == "q8_0" ? DType::Q8_0
                                              : DType::F16;
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
