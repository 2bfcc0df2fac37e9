#pragma once
// Logging facade: one named spdlog logger per module, configured in one place.
// Logs go to stderr so that `tern run` can stream only generated text to stdout.
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace tern::log {

// Call once from main. level: trace, debug, info, warn, error, off.
void init(const std::string& level = "info");

// The logger for a module ("gguf", "model", "server", ...), created on first use.
std::shared_ptr<spdlog::logger> get(const std::string& module);

}  // namespace tern::log
