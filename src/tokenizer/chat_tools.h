#pragma once
// The texts of the templates' tool sections (see chat_template.h), shared by
// the family formatters in chat_template.cpp.
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/tokenizer/chat_template.h"

namespace tern::chat_tools {

inline constexpr std::string_view kCallOpen = "<tool_call>";
inline constexpr std::string_view kCallClose = "</tool_call>";

// JSON text as Python's json.dumps writes it (", " and ": " between items),
// which is what the templates' `tojson` produces. Invalid JSON is kept as is.
std::string tojson(std::string_view json_text, int indent = -1);
// {"type": "function", "function": {"name", "description", "parameters"}}.
std::string tool_json(const ChatTool& t, int indent = -1);
// {"name": "f", "<args_key>": {...}} for a call in the history.
std::string call_json(const ChatToolCall& c, std::string_view args_key);

// Qwen 2.5's tool section, appended to the system text: "\n\n# Tools ... </tool_call>".
std::string hermes_section(std::span<const ChatTool> tools);
// Llama 3's guidance and tool list, put in front of the first user message.
std::string llama3_preamble(std::span<const ChatTool> tools);

// The generic fallback for templates without a tool section: the tool
// section joins the system text, calls become <tool_call> text in the
// assistant's content, and tool results user turns of <tool_response> text.
std::vector<ChatMessage> lower_generic(std::span<const ChatMessage> msgs,
                                       std::span<const ChatTool> tools);

}  // namespace tern::chat_tools
