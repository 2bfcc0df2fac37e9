#include "tern/engine/generate.h"

#include <chrono>

#include "tern/core/error.h"
#include "tern/engine/engine.h"
#include "tern/sampling/sampler.h"
#include "tern/sampling/stop_matcher.h"
#include "tern/tokenizer/incremental_decoder.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Frees the sequence on every exit path.
struct SeqGuard {
  Engine& e;
  SeqId id;
  ~SeqGuard() { e.free_sequence(id); }
};

}  // namespace

GenerationResult generate(Engine& engine, std::span<const int32_t> prompt,
                          const GenerateOptions& opts) {
  if (prompt.empty()) throw InvalidArgument("the prompt is empty");
  if (int(prompt.size()) >= engine.n_ctx()) {
    throw InvalidArgument("the prompt has " + std::to_string(prompt.size()) +
                          " tokens; the context holds " + std::to_string(engine.n_ctx()));
  }
  const Tokenizer& tok = engine.tokenizer();
  Sampler sampler(opts.sampling, engine.n_vocab());
  StopMatcher stops(opts.sampling.stop);
  IncrementalDecoder detok(tok);
  GenerationResult r;
  r.prompt_tokens = int(prompt.size());
  r.seed = sampler.seed();
  SeqGuard seq{engine, engine.new_sequence()};
  for (int32_t t : prompt) sampler.accept(t, false);

  StepOutput out;
  Batch batch;
  batch.entries.resize(1);
  batch.entries[0].seq = seq.id;
  // Prefill in chunks; only the last chunk asks for logits.
  const auto t_prompt = Clock::now();
  const int chunk = std::max(1, opts.prefill_chunk);
  for (size_t i = 0; i < prompt.size(); i += size_t(chunk)) {
    const size_t n = std::min(prompt.size() - i, size_t(chunk));
    batch.entries[0].tokens = prompt.subspan(i, n);
    batch.entries[0].logits = i + n == prompt.size() ? LogitsMode::Last : LogitsMode::None;
    engine.step(batch, out);
  }
  r.prompt_ms = ms_since(t_prompt);

  const auto t_gen = Clock::now();
  const int max_new = opts.sampling.max_tokens < 0 ? engine.n_ctx() : opts.sampling.max_tokens;
  auto emit = [&](const std::string& s) {
    if (s.empty()) return true;
    r.text += s;
    return !opts.on_text || opts.on_text(s);
  };
  int32_t next = 0;
  bool stop_string_hit = false;
  batch.entries[0].logits = LogitsMode::Last;
  for (;;) {
    if (max_new == 0) {
      r.finish = FinishReason::Length;
      break;
    }
    next = sampler.sample(out.last(0));
    if (!opts.sampling.ignore_eos && tok.is_eog(next)) {
      r.finish = FinishReason::Stop;
      break;
    }
    r.tokens.push_back(next);
    sampler.accept(next, true);
    const auto m = stops.push(detok.push(next));
    if (!emit(m.emit)) {
      r.finish = FinishReason::Cancelled;
      break;
    }
    if (m.stopped) {
      r.finish = FinishReason::Stop;
      stop_string_hit = true;
      break;
    }
    // Stop before a forward pass whose logits nobody would use.
    if (int(r.tokens.size()) >= max_new || engine.seq_len(seq.id) + 1 > engine.n_ctx()) {
      r.finish = FinishReason::Length;
      break;
    }
    batch.entries[0].tokens = std::span<const int32_t>(&next, 1);
    engine.step(batch, out);
  }
  if (r.finish != FinishReason::Cancelled && !stop_string_hit) {
    const auto m = stops.push(detok.flush());
    emit(m.emit);
    if (!m.stopped) emit(stops.flush());
  }
  r.generate_ms = ms_since(t_gen);
  return r;
}

}  // namespace tern
