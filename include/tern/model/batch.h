#pragma once
// A batch for one forward pass: several sequences, each contributing a run of
// new tokens (a prefill chunk or a single decode token). Linear layers run once
// over all rows of the batch; attention runs per sequence against its own KV.
//
// A position holds a token id or, for media (an image's projected tiles), an
// embedding row: EmbeddingRun lists the entry's positions whose input is a
// row instead of the token's embedding. Their token ids are still there
// (placeholders: the KV's prefix chain hashes them, with the media's content
// hash as an extra key). Text-only entries leave `embeddings` empty and cost
// nothing more. Positions are plain 1-D (the three projector types' text
// models use ordinary RoPE positions for image tokens).
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
  // No logits: the final hidden state (after the output norm, before the LM
  // head) of every token of the entry, for embeddings (model/pooling.h).
  Hidden,
};

// Positions [offset, offset + n) of an entry take rows (n, d_model) as their
// input embeddings (used as they are: no embedding scale).
// bidirectional: the run's positions attend to every position of the run
// (llama.cpp's non-causal image attention, for gemma3), not only the earlier
// ones; the run should then hold the image's whole span (a span cut over two
// steps sees only its own part, as llama.cpp's does over two ubatches).
struct EmbeddingRun {
  int offset = 0;
  int n = 0;
  const float* rows = nullptr;  // (n, d_model), valid for the step
  bool bidirectional = false;
};

struct BatchEntry {
  SeqId seq = -1;
  std::span<const int32_t> tokens;  // new tokens, appended after the sequence's KV
  LogitsMode logits = LogitsMode::Last;
  std::span<const EmbeddingRun> embeddings = {};  // sorted, disjoint, inside tokens
  LoraSelection lora{};  // the adapter this entry's rows run with (none: the base model)
  // false: the step writes the entry's KV but does not commit it; the caller
  // commits the prefix it keeps with Engine::commit (a speculative verify:
  // rejected positions are never committed, so never published to the
  // prefix cache, and the next step overwrites them).
  bool commit = true;
  // Positions written by earlier uncommitted entries of this sequence that
  // these tokens follow: they go to seq_len + skip .. and attend to those
  // positions too. Lets a drafter extend its own uncommitted guesses one
  // token a pass instead of feeding them all again. Needs commit = false.
  int skip = 0;
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
  // Entries with LogitsMode::Hidden: first_hidden[i] is entry i's first row
  // of `hidden` (-1 for the other entries); it has tokens.size() rows.
  int d_model = 0;
  std::vector<float> hidden;  // (hidden rows, d_model)
  std::vector<int> first_hidden;

  // Entry i's hidden rows (n tokens, d_model); entry i asked for Hidden.
  std::span<const float> hidden_rows(int i, int n) const {
    return {hidden.data() + size_t(first_hidden[size_t(i)]) * size_t(d_model),
            size_t(n) * size_t(d_model)};
  }

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
