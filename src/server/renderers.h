#pragma once
// The renderers of the answer's events, one per API shape, each built from
// plain values (no server, no model) so it is unit-tested on event
// sequences. The exchanges (api_exchange.h) build them from a submission.
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "api_exchange.h"
#include "tern/server/openai_bodies.h"
#include "tern/server/openai_choices.h"
#include "tern/server/responses_api.h"

namespace tern::server {

// OpenAI chat completions and completions (openai_exchange.cpp). One choice
// without log probabilities streams reasoning as delta.reasoning_content and
// tool calls as delta.tool_calls (name first, then argument fragments);
// several choices or log probabilities stream each choice's raw text with
// its index (openai_choices.h).
struct OpenAiRendering {
  ResponseMeta meta;
  bool include_usage = false;  // stream_options.include_usage
  int n = 1;
  bool logprobs = false;
  TokenText token_text;   // a token's text, for log probabilities
  size_t echo_bytes = 0;  // completions with echo: the text_offset of the first token
};
std::unique_ptr<AnswerRenderer> make_openai_renderer(OpenAiRendering r);

// Anthropic Messages (anthropic_messages.cpp): content blocks (thinking,
// text, tool_use) opened and closed around their deltas.
struct AnthropicRendering {
  std::string id;  // "msg_..."
  std::string model;
  int prompt_tokens = 0;
  bool thinking_blocks = false;  // the request enabled thinking: reasoning is shown
  // Blocks open as their text arrives (a reasoning model's output); else a
  // text block opens with the stream.
  bool blocks_on_demand = false;
};
std::unique_ptr<AnswerRenderer> make_anthropic_renderer(AnthropicRendering r);

// OpenAI Responses (responses_api.cpp): output items (reasoning, message,
// function calls) with sequence-numbered events. `remember` is called with
// the answer and the final response object once a response completes
// without an error (the store keeps it for previous_response_id).
struct ResponsesRendering {
  ResponsesMeta meta;
  bool items_on_demand = false;  // a reasoning model: items open as their text arrives
  std::function<void(const std::string& text, std::span<const ToolCallOut> calls,
                     const nlohmann::json& response)>
      remember;
};
std::unique_ptr<AnswerRenderer> make_responses_renderer(ResponsesRendering r);

// The WebSocket protocol (ws_exchange.cpp, web/PROTOCOL.md): start, delta
// (text, reasoning, token count), tool_call and done messages, one JSON
// document per line. A `responses` message carries the Responses API's
// final object in its done message, rendered by `response`.
struct WsRendering {
  std::string id;          // the client's id for the generation
  std::string request_id;  // the server's
  std::string model;
  int prompt_tokens = 0;
  std::unique_ptr<AnswerRenderer> response;  // a `responses` message; null for `generate`
  AnswerOptions response_options;            // how `response` decodes the whole text
};
std::unique_ptr<AnswerRenderer> make_ws_renderer(WsRendering r);

}  // namespace tern::server
