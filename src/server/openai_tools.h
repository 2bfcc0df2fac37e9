#pragma once
// Tool calling in OpenAI chat requests: `tools`, `tool_choice`,
// `parallel_tool_calls`, and the tool parts of messages (an assistant's
// `tool_calls`, a tool message's `tool_call_id`). Errors are ApiErrors (400)
// naming the field.
#include <nlohmann/json.hpp>
#include <string>

#include "tern/server/openai_request.h"

namespace tern::server {

// Reads tools, tool_choice and parallel_tool_calls into r. A tool whose
// schema must be enforced (strict, or a forced tool_choice) is compiled here,
// so an unsupported keyword is a 400 naming it.
void parse_tools(const nlohmann::json& body, GenerationRequest& r);

// The Responses API's flat function tools ({"type": "function", "name",
// "parameters", ...}) and tool_choice ({"type": "function", "name"}), read
// like the chat fields above.
void parse_responses_tools(const nlohmann::json& body, GenerationRequest& r);

// The tool parts of message `m` (at `where`, e.g. "messages[2]") into out.
void parse_message_tools(const nlohmann::json& m, const std::string& where, Message& out);

}  // namespace tern::server
