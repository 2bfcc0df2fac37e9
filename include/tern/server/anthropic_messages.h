#pragma once
// Anthropic's Messages API (POST /v1/messages): its request parsed into the
// internal GenerationRequest, and its bodies, stream events and errors.
// Text only: `system` (a string or text blocks), `messages` with string or
// text-block content, `max_tokens` (required), `stop_sequences`,
// `temperature`, `top_p`, `top_k`, `stream`. Pure functions, unit-tested
// without a model.
#include <nlohmann/json.hpp>
#include <string>

#include "tern/sched/stream.h"
#include "tern/server/api_error.h"
#include "tern/server/openai_request.h"

namespace tern::server {

GenerationRequest parse_anthropic_request(const nlohmann::json& body,
                                          UnknownFields unknown = UnknownFields::Ignore);

// "end_turn", "max_tokens", or "stop_sequence" when one of stop_sequences
// ended it (the Finish names it).
const char* anthropic_stop_reason(const sched::Finish& f);

// usage: input_tokens counts the prompt tokens not read from the prefix cache,
// cache_read_input_tokens the rest (Anthropic's split).
nlohmann::json anthropic_usage(const sched::Usage& u);

// The message object: {"id", "type": "message", "role": "assistant", "model",
// "content": [{"type": "text", "text"}], "stop_reason", "stop_sequence", "usage"}.
nlohmann::json anthropic_message(const std::string& id, const std::string& model,
                                 const std::string& text, const sched::Finish& f);

// {"type": "error", "error": {"type": "invalid_request_error", "message"}}:
// the error type follows the HTTP status as Anthropic's does.
nlohmann::json anthropic_error_body(const ApiError& e);

}  // namespace tern::server
