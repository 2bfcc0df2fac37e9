#pragma once
// Engine-thread state of one running request: its KV sequence, sampler,
// detokenizer and stop-string matcher, and how much of its context is in the
// KV cache. Private to the scheduler.
//
// `tokens` is the whole context: the prompt, then every sampled token that is
// to be fed back. The KV holds the first `in_kv` of them; each step feeds the
// next ones (a prefill chunk when several are pending, a decode token when
// one is) and asks for logits only when the chunk reaches the end. A
// preempted sequence loses its KV (in_kv = 0, seq = -1) but keeps its tokens
// and sampler, so on re-admission it reattaches what the prefix cache still
// holds and recomputes the rest: the same path as a new prompt.
#include <cstdint>
#include <optional>
#include <vector>

#include "drafter.h"
#include "media_feed.h"
#include "tern/model/batch.h"
#include "tern/model/pooling.h"
#include "tern/sampling/json_constraint.h"
#include "tern/sampling/sampler.h"
#include "tern/sampling/stop_matcher.h"
#include "tern/sched/request.h"
#include "tern/tokenizer/incremental_decoder.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::sched {

// The grammar mask for p.response_format over tok's vocabulary (whose byte
// trie is built once per vocabulary and shared), or nullptr for free text.
// Throws SchemaError on a bad schema.
std::unique_ptr<JsonConstraint> make_constraint(const SamplingParams& p, const Tokenizer& tok);

class Sequence {
 public:
  Sequence(Request r, const Tokenizer& tok, int32_t n_vocab, uint64_t order)
      : req(std::move(r)),
        order(order),
        sampler(req.params, n_vocab),
        decoder(tok),
        stop(req.params.stop),
        tokens(req.prompt),
        media(req.media.size()) {
    // The repeat penalty looks at the prompt too.
    for (int32_t t : req.prompt) sampler.accept(t, false);
    sampler.constrain(make_constraint(req.params, tok));
  }

  bool embeds() const { return pooler.has_value(); }
  // A generation, or an embedding whose pooling reads only the last row
  // (Pooler::reuses_prefix): its prompt may start from cached KV and its
  // blocks are published to the prefix cache.
  bool reuses_prefix() const { return !embeds() || pooler->reuses_prefix(); }
  // Tokens still to prefill: a generation keeps its last pending token for a
  // decode entry, an embedding prefills to the end.
  bool prefilling() const { return pending() > (embeds() ? 0 : 1); }
  // One token to feed back: the next step decodes it.
  bool decoding() const { return !embeds() && pending() == 1; }

  int prompt_len() const { return int(req.prompt.size()); }
  int pending() const { return int(tokens.size()) - in_kv; }  // tokens to feed
  bool has_kv() const { return seq >= 0; }

  Request req;
  uint64_t order;  // admission order, kept across preemptions: larger is newer
  SeqId seq = -1;  // -1: waiting for (re-)admission
  Sampler sampler;
  IncrementalDecoder decoder;
  StopMatcher stop;

  std::vector<int32_t> tokens;  // prompt + sampled tokens to feed back
  SeqMedia media;               // its media spans' rows and encodes (the MediaFeed's)
  int in_kv = 0;                // tokens[0, in_kv) are in the KV cache
  int last_chunk = 0;           // the size of its last prefill chunk (a chunk at most doubles it)
  int n_generated = 0;          // tokens sampled
  bool done = false;            // finished: retire at this boundary
  bool in_pass = false;         // an entry of the yielding pass now running (yield_round)
  int preemptions = 0;
  // Speculative decoding: this step's verify entry (the token to feed, then
  // the guesses; empty when it decodes plainly), how long the next guess
  // should be (from how many guesses were kept and what one costs), and
  // totals for its timings.
  std::vector<int32_t> verify;
  std::vector<int32_t> guesses;  // the draft model's, before they go into verify
  DraftLength draft_len;
  int draft_n = 0;
  int draft_accepted = 0;
  // Predicted Outputs: where the output is in the request's prediction,
  // whether this step's guesses came from it, and its guesses kept / not.
  size_t prediction_cursor = 0;
  bool verify_predicted = false;
  int prediction_accepted = 0;
  int prediction_rejected = 0;
  int io_retries = 0;  // recomputes after a flash-tier failure
  // An embedding (Request::pooling): its positions' final hidden states so
  // far, pooled; reset when it loses its KV and is recomputed.
  std::optional<Pooler> pooler;
  std::vector<float> embedding;  // the pooled vector, once the prompt is all in

  // Prompt accounting for timings (first admission only: a recompute after
  // preemption is the server's cost, not the request's prompt).
  bool started = false;
  int prompt_computed = 0;  // prompt tokens run through the model
  int reused_dram = 0;      // prompt tokens whose KV came from DRAM
  int reused_flash = 0;     // ... reloaded from flash

  Clock::time_point admitted{};
  Clock::time_point first_token{};
  Clock::time_point last_token{};
};

}  // namespace tern::sched
