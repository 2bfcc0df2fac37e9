// libFuzzer target for multimodal projector (mmproj) files: the GGUF reader,
// then the clip metadata checks (vision_config.cpp) and the per-projector
// tensor checks (mmproj.cpp, tensor_specs.cpp) a file passes before the
// encoder may use it, and the same for the audio half (audio_mmproj.cpp).
// Seeds: `fuzz_seeds mmproj DIR` (a tiny file of each image and audio
// projector type). Every input must load or be rejected with FormatError,
// as an image and as an audio projector; a loaded file must have a config
// the encoder can run (no zero or negative sizes) and a view of every
// tensor it needs.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "tern/core/error.h"
#include "tern/vision/audio_mmproj.h"
#include "tern/vision/mmproj.h"

namespace {

using tern::fuzz::check;
using tern::vision::Mmproj;
using tern::vision::VisionConfig;

void check_config(const VisionConfig& c) {
  check(c.image_size > 0 && c.patch_size > 0 && c.n_heads > 0 && c.n_layers > 0);
  check(c.d_model > 0 && c.d_ff > 0 && c.d_out > 0 && c.merge > 0);
  check(c.d_model % c.n_heads == 0 && c.head_dim() > 0);
  check(c.patches_per_side() > 0 && c.patches_per_side() % c.merge == 0);
  check(c.n_positions() >= c.n_patches());
  check(c.n_output_tokens() > 0);
  check(c.n_blocks_run() >= 0 && c.n_blocks_run() <= c.n_layers);
  check(c.projector != tern::vision::ProjectorType::Mlp || c.d_proj_hidden > 0);
}

void check_weights(const Mmproj& m) {
  const auto& w = m.weights();
  const VisionConfig& c = m.config();
  check(w.patch_w != nullptr && w.pos_embd != nullptr);
  check(w.layers.size() == size_t(c.n_layers));
  for (const auto& l : w.layers) {
    check(l.ln1_w && l.q_w && l.k_w && l.v_w && l.o_w && l.ln2_w && l.up_w && l.down_w);
  }
  check(m.find(w.patch_w->name) == w.patch_w);
}

void check_audio(const tern::vision::AudioMmproj& m) {
  const tern::vision::AudioConfig& c = m.config();
  check(c.d_model > 0 && c.d_ff > 0 && c.n_layers > 0 && c.n_heads > 0 && c.n_mel > 0);
  check(c.d_model % c.n_heads == 0 && c.d_out > 0 && c.stack_factor > 0);
  check(c.n_pos_table >= c.n_positions() && c.tokens_per_chunk() > 0);
  const auto& w = m.weights();
  check(w.conv1_w && w.conv1_b && w.conv2_w && w.conv2_b && w.pos_embd);
  check(w.layers.size() == size_t(c.n_layers));
  for (const auto& l : w.layers) check(l.ln1_w && l.q_w && l.k_w && l.v_w && l.o_w && l.up_w);
  check(c.projector == tern::vision::AudioProjector::Qwen2a ? w.fc_w != nullptr
                                                            : w.mlp1_w && w.mlp2_w);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tern::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const Mmproj m = Mmproj::from_memory(std::span<const uint8_t>(data, size), "fuzz.mmproj");
    check_config(m.config());
    check_weights(m);
  } catch (const tern::FormatError&) {
    // Rejected cleanly.
  }
  try {
    const auto m =
        tern::vision::AudioMmproj::from_memory(std::span<const uint8_t>(data, size), "fuzz.mmproj");
    check_audio(m);
  } catch (const tern::FormatError&) {
    // Rejected cleanly.
  }
  return 0;
}
