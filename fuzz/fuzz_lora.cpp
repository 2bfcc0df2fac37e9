// libFuzzer target for LoRA adapter files (model/lora.cpp): the GGUF reader,
// then the adapter checks against a base model (fuzz_fixtures.h): general /
// adapter type, architecture, tensor names, lora_a/lora_b pairs and shapes,
// finite values; then the int8 packing of every pair. The loader reads a
// path, so each input is written to a scratch file first. Seeds:
// `fuzz_seeds lora DIR`. Every input must load or be rejected with
// FormatError; a loaded adapter must hold only matrices of the base's shapes.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_fixtures.h"
#include "fuzz_util.h"
#include "tern/core/error.h"
#include "tern/model/lora.h"

namespace {

using tern::fuzz::check;

const tern::ModelConfig& base() {
  static const tern::ModelConfig c = tern::fuzz::lora_base();
  return c;
}

void check_adapter(const tern::LoraAdapter& ad) {
  const tern::ModelConfig& c = base();
  int n = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    for (int s = 0; s < tern::kLoraSlots; ++s) {
      const tern::LoraMatrix* m = ad.get(l, tern::LoraSlot(s));
      if (!m) continue;
      ++n;
      check(m->rank >= 1 && m->rank <= ad.max_rank() && m->rank <= tern::kMaxLoraRank);
      check(m->n_in > 0 && m->n_out > 0);
      check(m->a.n_out == m->rank && m->a.n_in >= m->n_in);
    }
  }
  check(n == ad.n_matrices() && n > 0);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tern::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tern::fuzz::scratch_dir() + "/adapter.gguf";
  tern::fuzz::write_file(path, std::span<const uint8_t>(data, size));
  try {
    check_adapter(*tern::LoraAdapter::load(path, base()));
  } catch (const tern::FormatError&) {
    // Rejected cleanly.
  }
  return 0;
}
