#pragma once
// Engine-thread state of one running request: its KV sequence, sampler,
// detokenizer and stop-string matcher, and where its prompt prefill stands.
// Private to the scheduler.
#include <cstdint>

#include "tern/model/batch.h"
#include "tern/sampling/sampler.h"
#include "tern/sampling/stop_matcher.h"
#include "tern/sched/request.h"
#include "tern/tokenizer/incremental_decoder.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::sched {

class Sequence {
 public:
  Sequence(Request r, SeqId seq, const Tokenizer& tok, int32_t n_vocab)
      : req(std::move(r)),
        seq(seq),
        sampler(req.params, n_vocab),
        decoder(tok),
        stop(req.params.stop),
        admitted(Clock::now()) {
    // The repeat penalty looks at the prompt too.
    for (int32_t t : req.prompt) sampler.accept(t, false);
  }

  bool prefilling() const { return prefilled < int(req.prompt.size()); }
  int prompt_len() const { return int(req.prompt.size()); }

  Request req;
  SeqId seq;
  Sampler sampler;
  IncrementalDecoder decoder;
  StopMatcher stop;

  int prefilled = 0;        // prompt tokens already in the KV
  int32_t next_token = -1;  // the decode input once the prompt is in (last sampled token)
  int n_generated = 0;      // tokens sampled
  bool done = false;        // finished: retire at this boundary

  Clock::time_point admitted;
  Clock::time_point first_token{};
  Clock::time_point last_token{};
};

}  // namespace tern::sched
