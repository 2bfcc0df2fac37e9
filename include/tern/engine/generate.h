#pragma once
// Single-sequence generation on top of Engine::step, for the CLI commands and
// tests (the server's scheduler runs its own batched loop). Prefill runs in
// chunks of up to `prefill_chunk` tokens; decode samples one token per step.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tern/sampling/params.h"

namespace tern {

class Engine;

enum class FinishReason { Stop, Length, Cancelled };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled"

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated token ids (excluding the prompt)
  std::string text;             // generated text (stop string excluded)
  FinishReason finish = FinishReason::Length;
  int prompt_tokens = 0;
  double prompt_ms = 0;     // prefill wall time
  double generate_ms = 0;   // decode wall time after the first token
  uint64_t seed = 0;
};

struct GenerateOptions {
  SamplingParams sampling;
  int prefill_chunk = 512;
  // Called with each piece of streamed text (complete UTF-8, never a partial stop
  // string). Return false to cancel.
  std::function<bool(std::string_view)> on_text;
};

// Runs prompt -> completion on a fresh sequence (freed afterwards).
GenerationResult generate(Engine& engine, std::span<const int32_t> prompt,
                          const GenerateOptions& opts);

}  // namespace tern
