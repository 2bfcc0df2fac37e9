#include "tern/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

namespace tern::log {
namespace {
std::mutex g_mu;
spdlog::level::level_enum g_level = spdlog::level::info;
std::shared_ptr<spdlog::sinks::sink> sink() {
  static auto s = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  return s;
}
}  // namespace

void init(const std::string& level) {
  std::lock_guard lock(g_mu);
  g_level = spdlog::level::from_str(level);
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->set_level(g_level); });
}

std::shared_ptr<spdlog::logger> get(const std::string& module) {
  std::lock_guard lock(g_mu);
  if (auto l = spdlog::get(module)) return l;
  auto l = std::make_shared<spdlog::logger>(module, sink());
  l->set_level(g_level);
  l->set_pattern("[%H:%M:%S.%e] [%n] [%^%l%$] %v");
  spdlog::register_logger(l);
  return l;
}

}  // namespace tern::log
