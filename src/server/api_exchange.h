#pragma once
// One API shape as the routes see it: a parser of its request body into the
// internal GenerationRequest, and a renderer of the answer's events
// (answer.h) in its wire format. Every HTTP API (OpenAI chat and
// completions, OpenAI Responses, Anthropic Messages) and the WebSocket
// protocol is one of these; the routes, the submission, the answer decoding
// and the scheduler are shared and never know which API a request came from.
//
//   body --ApiExchange::parse--> GenerationRequest --submit--> Streams
//   Streams --AnswerStream (a decoder per choice)--> AnswerEvents
//           --AnswerRenderer--> SSE events / WebSocket frames / one JSON body
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "answer.h"
#include "generation.h"
#include "tern/sched/stream.h"
#include "tern/server/openai_request.h"

namespace tern::server {

// What one choice produced, for the non-streaming body.
struct ChoiceOutput {
  std::string text;                    // as generated (echo included)
  std::vector<TokenLogprob> logprobs;  // empty unless asked for
  sched::Finish finish;
  Answer answer;  // the text decoded (AnswerStream::body fills it)
};

// How a chat answer is decoded: thinking split out when the submission says
// so (a reasoning model), tool calls parsed out when the request has tools.
AnswerOptions chat_answer(ServerContext& ctx, const Submission& s, bool tools,
                          bool stream_arguments = false);

// An API's wire format. Streaming methods return wire text: SSE events for
// the HTTP APIs, one JSON message per line for the WebSocket.
class AnswerRenderer {
 public:
  virtual ~AnswerRenderer() = default;
  // Streaming: what opens the stream.
  virtual std::string open() = 0;
  // Streaming: what choice `index` produced since the last drain: its chunk
  // (token count, log probabilities) and its decoded events, ending with
  // End once the choice ended (an End with reason Error renders as the API's
  // in-stream error where the API has one per choice).
  virtual std::string render(size_t index, const sched::StreamChunk& c,
                             std::span<const AnswerEvent> events) = 0;
  // Streaming, once every choice has rendered its End.
  virtual std::string close(std::span<const sched::Finish> f) {
    (void)f;
    return {};
  }
  // Not streaming: the body once every choice has ended without an error.
  virtual nlohmann::json body(std::span<const ChoiceOutput> c) = 0;
};

// A renderer whose output is each event's, in order (most APIs: the chunk's
// token count and log probabilities do not show).
class EventRenderer : public AnswerRenderer {
 public:
  std::string render(size_t, const sched::StreamChunk&,
                     std::span<const AnswerEvent> events) override {
    std::string out;
    for (const AnswerEvent& e : events) out += render_event(e);
    return out;
  }

 protected:
  virtual std::string render_event(const AnswerEvent& e) = 0;
};

class ApiExchange {
 public:
  virtual ~ApiExchange() = default;
  // Prep thread: the JSON body into the internal request. Throws ApiError.
  virtual GenerationRequest parse(const nlohmann::json& body) = 0;
  // Reactor, once the request is submitted: how its output is decoded, and
  // who renders it (`streaming`: the request streams).
  virtual AnswerOptions answer_options(const Submission& s, bool streaming) = 0;
  virtual std::unique_ptr<AnswerRenderer> renderer(const Submission& s) = 0;
};

// One request's answer on its way out: a decoder per choice feeding the
// API's renderer. The HTTP route and the WebSocket session both drive it.
class AnswerStream {
 public:
  AnswerStream(ApiExchange& api, const Submission& s, bool streaming);

  // Streaming: the opening, with the echoed prompt (completions) as each
  // choice's first text.
  std::string open();
  // Streaming: a drained chunk of choice `index` (nothing once it ended).
  std::string push(size_t index, const sched::StreamChunk& c);
  bool ended(size_t index) const { return bool(finish_[index]); }
  bool all_ended() const;
  // Streaming, once all_ended(): the closing.
  std::string close();

  // Not streaming, once every choice has ended: the first failed choice's
  // finish (the route answers with an error), or null.
  const sched::Finish* failed(std::span<const ChoiceOutput> c) const;
  // Not streaming: the body (decodes each choice's text first).
  nlohmann::json body(std::vector<ChoiceOutput>& c) const;

 private:
  std::unique_ptr<AnswerRenderer> renderer_;
  AnswerOptions options_;
  std::vector<AnswerDecoder> decoders_;  // one per choice
  std::vector<std::optional<sched::Finish>> finish_;
  std::string echo_;
};

// POST /v1/chat/completions and /v1/completions.
std::unique_ptr<ApiExchange> make_openai_exchange(ServerContext& ctx, GenerationRequest::Kind kind);
// POST /v1/messages (anthropic_messages.cpp).
std::unique_ptr<ApiExchange> make_anthropic_exchange(ServerContext& ctx, const std::string& rid);
// POST /v1/responses (responses_api.cpp).
std::unique_ptr<ApiExchange> make_responses_exchange(ServerContext& ctx, const std::string& rid);
// A WebSocket `generate` (chat or completion fields) or `responses` message
// (ws_exchange.cpp); `id` is the client's name for the generation.
std::unique_ptr<ApiExchange> make_ws_exchange(ServerContext& ctx, const std::string& id,
                                              const std::string& request_id, bool responses);

}  // namespace tern::server
