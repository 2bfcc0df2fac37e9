#pragma once
// A batch for one forward pass: several sequences, each contributing a run of
// new tokens (a prefill chunk or a single decode token). Linear layers run once
// over all rows of the batch; attention runs per sequence against its own KV.
#include <cstdint>
#include <span>
#include <vector>

#include "tern/core/types.h"
#include "tern/model/lora.h"

namespace tern {

enum class LogitsMode : uint8_t {
  None,  // prefill chunk: no logits wanted
  Last,  // logits for the entry's last token (decode, or end of prompt)
  All,   // logits for every token of the entry (perplexity)
};

struct BatchEntry {
  SeqId seq = -1;
  std::span<const int32_t> tokens;  // new tokens, appended after the sequence's KV
  LogitsMode logits = LogitsMode::Last;
  LoraSelection lora{};  // the adapter this entry's rows run with (none: the base model)
};

struct Batch {
  std::vector<BatchEntry> entries;
  int total_tokens() const {
    int n = 0;
    for (const auto& e : entries) n += int(e.tokens.size());
    return n;
  }
};

// Logits produced by a step, rows of n_vocab floats. For entry i,
// first_row[i] is its first row (or -1 if it asked for none) and n_rows[i]
// how many rows it has (1 for Last, tokens.size() for All).
struct StepOutput {
  int n_vocab = 0;
  std::vector<float> logits;  // (rows, n_vocab)
  std::vector<int> first_row;
  std::vector<int> n_rows;

  std::span<const float> row(int r) const {
    return {logits.data() + size_t(r) * size_t(n_vocab), size_t(n_vocab)};
  }
  std::span<float> row(int r) {
    return {logits.data() + size_t(r) * size_t(n_vocab), size_t(n_vocab)};
  }
  // Logits of entry i's last token (entry must have asked for logits).
  std::span<const float> last(int i) const { return row(first_row[i] + n_rows[i] - 1); }
  std::span<float> last(int i) { return row(first_row[i] + n_rows[i] - 1); }
};

}  // namespace tern
