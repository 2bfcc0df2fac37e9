#pragma once
// What the scheduler is asked to run: prompt token ids, sampling settings and
// the stream results go to. Built by the server from an HTTP/WebSocket
// message; the scheduler never sees JSON or sockets.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/memory_budget.h"
#include "tern/model/lora.h"
#include "tern/model/pooling.h"
#include "tern/sampling/params.h"
#include "tern/sched/stream.h"
#include "tern/vision/embedding_source.h"

namespace tern::sched {

using Clock = std::chrono::steady_clock;

// Where speculative guesses come from (after a request's own prediction):
// Auto: prompt lookup, then the draft model when one is loaded; Ngram:
// prompt lookup only; Draft: the draft model only.
enum class SpecSource : uint8_t { Auto, Ngram, Draft };

struct Request {
  std::string id;               // request id, carried by every log line about it
  std::vector<int32_t> prompt;  // token ids, non-empty
  // Images in the prompt: runs of positions whose input is an embedding row
  // (their prompt ids are placeholders), sorted by position, disjoint.
  std::vector<vision::MediaSpan> media;
  SamplingParams params;  // validated; max_tokens -1 = until the context is full
  std::shared_ptr<Stream> stream;
  // Who asked (the server names the connection): when requests wait, batch
  // slots and admission are shared fairly between clients, so one client's
  // many generations cannot hold every slot. Empty: one anonymous client.
  std::string client;
  // A sibling with the same prompt (the other choices of an n > 1 request):
  // this request stays queued until that one's prompt is in the KV cache,
  // then attaches it through the prefix cache, so the prompt is prefilled
  // once, not n times. It stops waiting if the sibling is preempted,
  // cancelled or finished. nullptr: no sibling.
  std::shared_ptr<const Stream> after;
  Clock::time_point arrival = Clock::now();
  // A session key (X-Session-Id, the `user` field, a WebSocket connection):
  // when the request ends, its KV stays pinned in DRAM for the scheduler's
  // session_ttl_s, so the session's next turn finds it. Empty: no pin.
  std::string session;
  // The LoRA adapter the request runs with (none: the base model). Held for
  // the request's life, so unloading the adapter does not affect it; its
  // identity joins the prefix-cache chain root (lora_salt).
  LoraSelection lora{};
  // Not None: an embedding, not a generation. The prompt is prefilled and
  // nothing is sampled; the final hidden states of its positions are pooled
  // (model/pooling.h) into Finish::embedding (Rank: the model's
  // classification head's outputs, the first being the relevance score;
  // the model must have the head). Its KV is private (never
  // reused from or published to the prefix cache) and freed as it finishes.
  Pooling pooling = Pooling::None;
  // Set by admission: the bytes of this request's image rows, reserved in
  // the memory budget until its prefill is past them (or it ends).
  std::shared_ptr<MemoryCharge> media_charge;
  // Predicted Outputs (OpenAI's `prediction`): the token ids of the text the
  // client expects the answer to be close to. Speculative decoding guesses
  // from it first (then from prompt lookup); the output is unchanged.
  std::vector<int32_t> prediction;
  // Speculative decoding for this request: at most this many guessed tokens
  // per verify (within SchedulerOptions::draft_max); 0 = none; -1 = no limit
  // of its own.
  int draft_max = -1;
  // Where its guesses may come from (within SchedulerOptions::spec_source).
  SpecSource spec_source = SpecSource::Auto;
};

// The prompt can never run: it does not fit the context, or the KV budget
// could not hold it even alone. submit() throws it; the server answers 400.
class PromptTooLongError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

// The request can never fit the memory budget (its images' embedding rows
// plus its prompt's KV exceed it, even alone). submit() throws it; the
// server answers 503 insufficient_memory.
class InsufficientMemoryError : public Error {
 public:
  using Error::Error;
};

enum class SubmitStatus : uint8_t {
  Accepted,
  QueueFull,     // the waiting queue is at max_queue: answer 429
  ShuttingDown,  // stop_accepting() was called: answer 503
};

}  // namespace tern::sched
