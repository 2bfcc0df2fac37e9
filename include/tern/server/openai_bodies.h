#pragma once
// OpenAI-shaped response bodies: chat.completion, chat.completion.chunk,
// text_completion, usage, errors, plus llama.cpp's `timings` object so tools
// built for it work. Pure functions of their inputs, unit-tested without a model.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "tern/sched/stream.h"
#include "tern/server/api_error.h"
#include "tern/server/openai_request.h"

namespace tern::server {

// What every object of one response shares.
struct ResponseMeta {
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
  GenerationRequest::Kind kind = GenerationRequest::Kind::Chat;
};

// OpenAI's finish_reason for a scheduler finish ("stop" / "length"; a
// cancellation by the server is reported as "stop").
const char* openai_finish_reason(sched::FinishReason r);

nlohmann::json usage_json(const sched::Usage& u);
nlohmann::json timings_json(const sched::Timings& t);

// Non-streaming bodies.
nlohmann::json completion_body(const ResponseMeta& m, const std::string& text,
                               const sched::Finish& f);

// Streaming chunks (each becomes one SSE `data:` line).
nlohmann::json chunk_role(const ResponseMeta& m, bool include_usage);  // chat only: role delta
nlohmann::json chunk_text(const ResponseMeta& m, const std::string& text, bool include_usage);
nlohmann::json chunk_finish(const ResponseMeta& m, const sched::Finish& f, bool include_usage);
nlohmann::json chunk_usage(const ResponseMeta& m, const sched::Finish& f);  // choices: []

// Tool calls (chat): a parsed call with the id the response gives it.
struct ToolCallOut {
  std::string id;  // "call_..."
  std::string name;
  std::string arguments;  // JSON text
};
// message.tool_calls: [{id, type: "function", function: {name, arguments}}].
nlohmann::json tool_calls_json(std::span<const ToolCallOut> calls);
// The two stream chunks of call `index` (of choice 0): first delta.tool_calls
// [{index, id, type, function: {name, arguments: ""}}], then
// [{index, function: {arguments}}].
nlohmann::json chunk_tool_call_head(const ResponseMeta& m, int index, const ToolCallOut& c,
                                    bool include_usage);
nlohmann::json chunk_tool_call_args(const ResponseMeta& m, int index, const std::string& args,
                                    bool include_usage);

// {"error": {...}} for an ApiError.
nlohmann::json error_body(const ApiError& e);

// JSON text that never throws on invalid UTF-8 (bad bytes become U+FFFD).
std::string dump(const nlohmann::json& j);

// One SSE event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& j);
// A named SSE event (Anthropic's and the Responses API's): "event: <name>\ndata: <json>\n\n".
std::string sse_event(std::string_view name, const nlohmann::json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace tern::server
