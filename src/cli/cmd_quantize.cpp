// tern quantize IN.gguf OUT.gguf TYPE: requantizes a model's linear weights
// (the recipe: include/tern/model/quantize_model.h) and prints what went
// where: tensors per type, the fallbacks forced by row lengths, bytes, time.
#include <chrono>
#include <cstdio>
#include <map>

#include "commands.h"
#include "tern/core/error.h"
#include "tern/gguf/gguf_file.h"
#include "tern/model/quantize_model.h"

namespace tern::cli {
namespace {

void print_summary(const std::vector<QuantizedTensor>& report, double seconds) {
  std::map<std::string, std::pair<int, size_t>> per_type;  // type -> tensors, bytes
  std::map<std::string, int> fallbacks;                    // "A -> B (rows of N)" -> tensors
  size_t bytes_in = 0, bytes_out = 0;
  int copied = 0;
  for (const QuantizedTensor& t : report) {
    bytes_in += t.bytes_in, bytes_out += t.bytes_out;
    if (!t.requantized) {
      ++copied;
      continue;
    }
    auto& [n, bytes] = per_type[std::string(dtype_name(t.to))];
    ++n, bytes += t.bytes_out;
    if (t.to != t.wanted) {
      fallbacks[std::string(dtype_name(t.wanted)) + " -> " + std::string(dtype_name(t.to))] += 1;
    }
  }
  for (const auto& [type, nb] : per_type) {
    std::printf("  %-8s %4d tensors  %8.2f MB\n", type.c_str(), nb.first, double(nb.second) / 1e6);
  }
  std::printf("  copied   %4d tensors (norms, biases, kept)\n", copied);
  for (const auto& [what, n] : fallbacks) {
    std::printf("  fallback %s: %d tensors (rows not whole blocks)\n", what.c_str(), n);
  }
  std::printf("%.2f MB -> %.2f MB in %.1f s\n", double(bytes_in) / 1e6, double(bytes_out) / 1e6,
              seconds);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  struct Opts {
    std::string in, out, type;
    bool pure = false, keep_output = false;
    std::vector<std::string> tensor_types;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      app.add_subcommand("quantize", "requantize a GGUF model's linear weights into a type");
  cmd->add_option("in", o->in, "source GGUF")->required();
  cmd->add_option("out", o->out, "output GGUF")->required();
  cmd->add_option("type", o->type, "target type: " + quantize_type_names())->required();
  cmd->add_flag("--pure", o->pure,
                "every linear weight in TYPE (token_embd and output too); only a row length "
                "TYPE's block does not divide forces another type");
  cmd->add_flag("--keep-output", o->keep_output,
                "copy output.weight (the tied token_embd.weight if none) unchanged");
  cmd->add_option("--tensor-type", o->tensor_types,
                  "REGEX=TYPE: tensors whose name REGEX matches get TYPE (repeatable)");
  cmd->add_option("-t,--threads", o->threads, "worker threads (default: one per core)")
      ->check(CLI::Range(0, 1024));
  cmd->callback([o] {
    QuantizeOptions opts;
    opts.type = parse_quantize_type(o->type);
    opts.pure = o->pure;
    opts.keep_output = o->keep_output;
    for (const std::string& spec : o->tensor_types) {
      const size_t eq = spec.rfind('=');
      if (eq == std::string::npos || eq == 0)
        throw InvalidArgument("--tensor-type '" + spec + "': expected REGEX=TYPE");
      opts.tensor_types.emplace_back(spec.substr(0, eq), parse_quantize_type(spec.substr(eq + 1)));
    }
    const gguf::GgufFile in = gguf::GgufFile::open(o->in);
    TaskPool pool(o->threads);
    std::printf("%s -> %s: %s%s, %d threads\n", o->in.c_str(), o->out.c_str(),
                std::string(dtype_name(opts.type)).c_str(), opts.pure ? " (pure)" : "",
                pool.size());
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<QuantizedTensor> report = quantize_model(in, o->out, opts, pool);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    print_summary(report, s);
  });
}

}  // namespace tern::cli
