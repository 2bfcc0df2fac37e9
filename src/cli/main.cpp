// tern: one binary for running, chatting with, measuring and serving GGUF models.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "commands.h"
#include "tern/core/error.h"
#include "tern/core/log.h"

int main(int argc, char** argv) {
  CLI::App app{"tern: fast LLM inference and serving on edge CPUs"};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.parse_complete_callback([&] { tern::log::init(log_level); });
  tern::cli::add_run_command(app);
  tern::cli::add_chat_command(app);
  tern::cli::add_perplexity_command(app);
  tern::cli::add_bench_command(app);
  tern::cli::add_gen_mmproj_command(app);
  tern::cli::add_gen_scripted_command(app);
  tern::cli::add_encode_image_command(app);
  tern::cli::add_encode_audio_command(app);
  tern::cli::add_gen_arch_command(app);
  tern::cli::add_gen_lora_command(app);
  tern::cli::add_gen_vlm_text_command(app);
  tern::cli::add_info_command(app);
  tern::cli::add_template_command(app);
  tern::cli::add_embed_command(app);
  tern::cli::add_quantize_command(app);
#ifdef TERN_HAVE_SERVER
  tern::cli::add_serve_command(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tern::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
