// tern info: what this binary will run on this machine — the CPU features it
// read, the kernel tables this build has and the CPU can run, the one chosen
// (and why: best available, or TERN_KERNELS), and the KV attention table that
// follows it. No model is loaded.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "tern/core/cpu.h"
#include "tern/kernels/ops.h"
#include "tern/kv/kv_attend.h"

namespace tern::cli {
namespace {

const char* machine() {
#if defined(__aarch64__)
  return "aarch64";
#elif defined(__x86_64__)
  return "x86_64";
#else
  return "other";
#endif
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "print the CPU features and the kernels chosen for them");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print one JSON object");
  cmd->callback([json] {
    const CpuFeatures& cpu = cpu_features();
    nlohmann::json isas = nlohmann::json::array();
    for (kernels::Isa i : kernels::available_isas()) isas.push_back(kernels::isa_name(i));
    const char* attention = kv::active_attend_kernels().isa;
    if (*json) {
      nlohmann::json j{{"machine", machine()},
                       {"cpu", cpu.brand},
                       {"logical_cores", cpu.logical_cores},
                       {"kernels", kernels::kernel_isa()},
                       {"kernels_choice", kernels::isa_choice()},
                       {"available_kernels", isas},
                       {"attention", attention}};
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("machine:    %s (%s), %d logical cores\n", machine(),
                cpu.brand.empty() ? "unknown CPU" : cpu.brand.c_str(), cpu.logical_cores);
    std::printf("kernels:    %s\n", kernels::isa_choice().c_str());
    std::printf("attention:  %s\n", attention);
  });
}

}  // namespace tern::cli
