#pragma once
// One API shape as the generation route sees it: a parser of its request body
// into the internal GenerationRequest, and a renderer of the generation's
// events in its wire format. Every HTTP API (OpenAI chat and completions,
// OpenAI Responses, Anthropic Messages) is one of these; the route, the
// submission and the scheduler are shared and never know which API a request
// came from. One object per request, so an API keeps what it parsed (ids,
// conversation history) until it renders.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "context.h"
#include "generation.h"
#include "tern/sched/stream.h"
#include "tern/server/openai_request.h"

namespace tern::server {

// What one choice produced, for the non-streaming body.
struct ChoiceOutput {
  std::string text;
  std::vector<TokenLogprob> logprobs;  // empty unless asked for
  sched::Finish finish;
};

class ApiExchange {
 public:
  virtual ~ApiExchange() = default;

  // Prep thread: the JSON body into the internal request. Throws ApiError.
  virtual GenerationRequest parse(const nlohmann::json& body) = 0;

  // Reactor, once the request is submitted. Returns the opening SSE events of
  // a stream (the caller drops them when the request does not stream).
  virtual std::string start(const Submission& s) = 0;
  // Streaming: the SSE events for a piece of text, then for the end (a
  // Finish with reason Error renders as the API's in-stream error).
  virtual std::string stream_text(const std::string& text) = 0;
  virtual std::string stream_end(const sched::Finish& f) = 0;
  // Not streaming: the body of a finished generation (never an Error finish:
  // the route answers those with error_response).
  virtual nlohmann::json body(const std::string& text, const sched::Finish& f) = 0;

  // The route drives every request through these three, one call per choice
  // (Submission::streams). An API with several choices (n > 1) or log
  // probabilities overrides them; the defaults render choice 0 with the
  // single-choice methods above.
  // Streaming: the events for what choice `index` produced since the last
  // drain (its text, log probabilities, and its end unless an Error).
  virtual std::string stream_choice(size_t index, const sched::StreamChunk& c) {
    return index == 0 && !c.text.empty() ? stream_text(c.text) : std::string();
  }
  // Streaming, once every choice has ended without an error.
  virtual std::string stream_done(const std::vector<sched::Finish>& f) { return stream_end(f[0]); }
  // Not streaming: the body once every choice has ended without an error.
  virtual nlohmann::json body_choices(const std::vector<ChoiceOutput>& c) {
    return body(c[0].text, c[0].finish);
  }
};

// POST /v1/chat/completions and /v1/completions.
std::unique_ptr<ApiExchange> make_openai_exchange(ServerContext& ctx, GenerationRequest::Kind kind);
// POST /v1/messages (anthropic_messages.cpp).
std::unique_ptr<ApiExchange> make_anthropic_exchange(ServerContext& ctx, const std::string& rid);
// POST /v1/responses (openai_responses.cpp).
std::unique_ptr<ApiExchange> make_responses_exchange(ServerContext& ctx, const std::string& rid);

}  // namespace tern::server
