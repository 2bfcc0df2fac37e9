#pragma once
// Each `tern` subcommand lives in its own file and registers itself here.
// add_*_command() adds the subcommand and its flags to the app and sets its
// callback; the callback returns through CLI11 so main() can map errors to exit codes.
#include <CLI/CLI.hpp>
#include <string>

namespace tern::cli {

// The model used when -m is not given: models/SmolLM2-135M-Instruct.Q4_1.gguf
// next to the binary's source tree, or $TERN_MODEL.
std::string default_model_path();

void add_run_command(CLI::App& app);           // cmd_run.cpp
void add_chat_command(CLI::App& app);          // cmd_chat.cpp
void add_perplexity_command(CLI::App& app);    // cmd_perplexity.cpp
void add_bench_command(CLI::App& app);         // cmd_bench.cpp
void add_serve_command(CLI::App& app);         // cmd_serve.cpp
void add_gen_mmproj_command(CLI::App& app);    // cmd_gen_mmproj.cpp
void add_gen_scripted_command(CLI::App& app);  // cmd_gen_scripted.cpp
void add_encode_image_command(CLI::App& app);  // cmd_encode_image.cpp
void add_encode_audio_command(CLI::App& app);  // cmd_encode_audio.cpp
void add_gen_arch_command(CLI::App& app);      // cmd_gen_arch.cpp
void add_gen_lora_command(CLI::App& app);      // cmd_gen_arch.cpp
void add_gen_vlm_text_command(CLI::App& app);  // cmd_gen_vlm_text.cpp
void add_info_command(CLI::App& app);          // cmd_info.cpp
void add_template_command(CLI::App& app);      // cmd_template.cpp
void add_embed_command(CLI::App& app);         // cmd_embed.cpp
void add_quantize_command(CLI::App& app);      // cmd_quantize.cpp

}  // namespace tern::cli
