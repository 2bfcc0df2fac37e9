#pragma once
// OpenAI's Responses API (POST /v1/responses): its request parsed into the
// internal GenerationRequest (plus what a continuation needs), and its
// response objects and stream events. Text only: `input` (a string or message
// items with input_text / output_text parts), `instructions`,
// `max_output_tokens`, `temperature`, `top_p`, `stream`, `store`,
// `previous_response_id`. Pure functions, unit-tested without a model.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tern/sched/stream.h"
#include "tern/server/openai_request.h"

namespace tern::server {

struct ResponsesRequest {
  GenerationRequest g;                // messages: instructions, history, this input
  std::vector<Message> conversation;  // history + this input: what a continuation inherits
  std::string previous_response_id;   // "" if none
  bool store = true;
  nlohmann::json echo;  // request fields the response object repeats (instructions, ...)
};

// Finds the conversation of a stored response (nothing if unknown or expired).
using ResponseLookup = std::function<std::optional<std::vector<Message>>(const std::string& id)>;

// Throws ApiError: 400 naming the field, 404 for an unknown previous_response_id.
ResponsesRequest parse_responses_request(const nlohmann::json& body, const ResponseLookup& lookup,
                                         UnknownFields unknown = UnknownFields::Ignore);

// What the response objects of one request share.
struct ResponsesMeta {
  std::string id;       // "resp_..."
  std::string item_id;  // the output message's id, "msg_..."
  int64_t created_at = 0;
  std::string model;
  nlohmann::json echo;       // from ResponsesRequest
  std::string reasoning_id;  // a reasoning model's reasoning item, "rs_..."
};

// The response object. status "in_progress" (no output, usage null),
// "completed", "incomplete" (max_output_tokens) or "failed" (f->error).
// A non-empty `reasoning` (a reasoning model's thinking) comes first in the
// output as a reasoning item with reasoning_text content.
nlohmann::json responses_object(const ResponsesMeta& m, const std::string& text,
                                const sched::Finish* f, const std::string& reasoning = {});
// "completed" / "incomplete" / "failed" for a finish.
const char* responses_status(const sched::Finish& f);
nlohmann::json responses_usage(const sched::Usage& u);
// The output message item (status "in_progress" or "completed").
nlohmann::json responses_message_item(const ResponsesMeta& m, const std::string& text,
                                      const char* status);
nlohmann::json responses_reasoning_item(const ResponsesMeta& m, const std::string& text,
                                        const char* status);

}  // namespace tern::server
