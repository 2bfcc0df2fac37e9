#pragma once
// The model the scheduler tests run on: generated once per process with the
// project's GGUF writer (random weights, byte-level vocabulary), so the tests
// never depend on a downloaded file. Greedy decoding of a random model is
// still deterministic, so "batched text == solo text" stays a real check.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tern/engine/engine.h"
#include "tern/model/batch.h"
#include "tiny_model.h"

namespace tern::sched::testutil {

// 131 tokens: 3 control tokens (EOS is <|im_end|>, id 2) and the 128 ASCII
// bytes, so any ASCII text encodes, one token a byte, and any output decodes
// to valid UTF-8 that compares byte for byte. KV: 6 layers x 3 KV heads of 64
// dimensions (SmolLM2's head shape, GQA groups of 2) make an int8-fp8 block
// of 32 tokens 78,336 bytes: a 1 MiB DRAM budget holds 13 of them, small
// enough to force preemption and spilling with a handful of sequences.
// An untied output matrix keeps greedy text varied (a tied random model
// mostly repeats its input token).
inline test::TinyModelSpec sched_model_spec() {
  test::TinyModelSpec s;
  s.n_layers = 6;
  s.d_model = 384;
  s.n_heads = 6;
  s.n_kv_heads = 3;
  s.d_ff = 512;
  s.n_vocab = 131;
  s.n_ctx = 1024;
  s.tied = false;
  s.seed = 7;
  return s;
}

inline const std::string& tiny_model_path() {
  static const std::string path = test::write_tiny_model(sched_model_spec(), "sched_tiny.gguf");
  return path;
}

// Engine options for the tiny model: its context and KV sequences; the
// rest (KV budget, flash tier) at the engine's defaults unless a test sets them.
inline EngineOptions tiny_engine_options(int n_ctx, int max_seqs) {
  EngineOptions o;
  o.model_path = tiny_model_path();
  o.n_ctx = n_ctx;
  o.max_seqs = max_seqs;
  return o;
}

// The reference the scheduler is held to: greedy decoding written directly
// on Engine::step, one sequence, the prompt in one chunk, then one token a
// step (argmax, ties to the lowest id). Stops after n tokens, never at EOS.
inline std::vector<int32_t> greedy_tokens(Engine& e, const std::vector<int32_t>& prompt, int n) {
  const SeqId seq = e.new_sequence();
  std::vector<int32_t> out, feed = prompt;
  StepOutput logits;
  while (int(out.size()) < n) {
    Batch b;
    b.entries.push_back({seq, std::span<const int32_t>(feed), LogitsMode::Last});
    e.step(b, logits);
    const auto row = logits.last(0);
    const int32_t next = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    out.push_back(next);
    feed = {next};
  }
  e.free_sequence(seq);
  return out;
}

}  // namespace tern::sched::testutil
