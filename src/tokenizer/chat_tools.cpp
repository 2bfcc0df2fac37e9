// Tool sections of the chat templates (see chat_tools.h).
#include "chat_tools.h"

#include <nlohmann/json.hpp>

namespace tern::chat_tools {
namespace {

using ojson = nlohmann::ordered_json;

void dump_py(const ojson& j, int indent, int depth, std::string& out) {
  const bool nl = indent >= 0;
  auto newline = [&](int d) {
    if (nl) out += "\n" + std::string(size_t(indent * d), ' ');
  };
  if (j.is_object() && !j.empty()) {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      if (!first) out += nl ? "," : ", ";
      first = false;
      newline(depth + 1);
      out += ojson(k).dump() + ": ";
      dump_py(v, indent, depth + 1, out);
    }
    newline(depth);
    out += '}';
  } else if (j.is_array() && !j.empty()) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out += nl ? "," : ", ";
      newline(depth + 1);
      dump_py(j[i], indent, depth + 1, out);
    }
    newline(depth);
    out += ']';
  } else {
    out += j.dump(-1, ' ', false, ojson::error_handler_t::replace);
  }
}

std::string py(const ojson& j, int indent) {
  std::string out;
  dump_py(j, indent, 0, out);
  return out;
}

ojson parse_or_string(std::string_view text) {
  ojson j = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? ojson(std::string(text)) : j;
}

std::string tool_list(std::span<const ChatTool> tools, const char* sep, int indent) {
  std::string out;
  for (const ChatTool& t : tools) out += sep + tool_json(t, indent);
  return out;
}

}  // namespace

std::string tojson(std::string_view json_text, int indent) {
  return py(parse_or_string(json_text), indent);
}

std::string tool_json(const ChatTool& t, int indent) {
  ojson f;
  f["name"] = t.name;
  if (!t.description.empty()) f["description"] = t.description;
  f["parameters"] = parse_or_string(t.parameters.empty() ? "{}" : t.parameters);
  ojson j;
  j["type"] = "function";
  j["function"] = std::move(f);
  return py(j, indent);
}

std::string call_json(const ChatToolCall& c, std::string_view args_key) {
  // The name is not checked for UTF-8 here: invalid bytes become U+FFFD, as in dump_py.
  const std::string name = ojson(c.name).dump(-1, ' ', false, ojson::error_handler_t::replace);
  return "{\"name\": " + name + ", \"" + std::string(args_key) +
         "\": " + tojson(c.arguments.empty() ? "{}" : c.arguments) + "}";
}

std::string hermes_section(std::span<const ChatTool> tools) {
  return "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
         "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" +
         tool_list(tools, "\n", -1) +
         "\n</tools>\n\nFor each function call, return a json object with function name and "
         "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
         "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
}

std::string llama3_preamble(std::span<const ChatTool> tools) {
  std::string out =
      "Given the following functions, please respond with a JSON for a function call with its "
      "proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": "
      "function name, \"parameters\": dictionary of argument name and its value}.Do not use "
      "variables.\n\n";
  for (const ChatTool& t : tools) out += tool_json(t, 4) + "\n\n";
  return out;
}

std::vector<ChatMessage> lower_generic(std::span<const ChatMessage> msgs,
                                       std::span<const ChatTool> tools) {
  std::vector<ChatMessage> out;
  size_t first = 0;
  if (!tools.empty()) {
    std::string system = !msgs.empty() && msgs[0].role == "system" ? msgs[0].content : "";
    if (!system.empty()) first = 1;
    out.push_back({"system", system + hermes_section(tools), {}});
    if (system.empty()) out.back().content.erase(0, 2);  // the section's leading blank line
  }
  for (size_t i = first; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    if (m.role == "tool") {
      const std::string body = "<tool_response>\n" + m.content + "\n</tool_response>";
      if (i > 0 && msgs[i - 1].role == "tool") {
        out.back().content += "\n" + body;
      } else {
        out.push_back({"user", body, {}});
      }
      continue;
    }
    ChatMessage c{m.role, m.content, {}};
    for (const ChatToolCall& call : m.tool_calls) {
      if (!c.content.empty()) c.content += "\n";
      c.content += std::string(kCallOpen) + "\n" + call_json(call, "arguments") + "\n" +
                   std::string(kCallClose);
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tern::chat_tools
