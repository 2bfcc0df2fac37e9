#pragma once
// A model's own chat template run by tern's Jinja engine (src/jinja), with the
// conversation handed over as llama.cpp's server hands it (see
// chat_template.h): what the template can take is probed once at load, and
// messages it cannot take are reshaped first (a system message folded into
// the next turn, call arguments as objects or as JSON text, text content as
// typed parts). Private to the tokenizer module; ChatTemplate is the API.
#include <ctime>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/jinja/template.h"
#include "tern/tokenizer/chat_template.h"

namespace tern::chat_jinja {

// What the template does with a probe conversation (llama.cpp's "caps").
struct Caps {
  bool system_role = true;        // a system message's text reaches the prompt
  bool string_content = true;     // content may be a string
  bool typed_content = false;     // content may be a list of {"type": "text", ...} parts
  bool object_arguments = false;  // a call's arguments are read as a dict
  bool tool_calls = true;         // an assistant message's tool_calls reach the prompt
  bool tools = true;              // the tools list reaches the prompt
  // How its model writes a call, when the template's own history shows a
  // form tern parses (see jinja_chat.cpp); none otherwise.
  std::optional<ChatToolFormat> call_format;
};

class Renderer {
 public:
  // Parses and probes `source`; throws jinja::Error if it does not parse.
  // `now`: the instant strftime_now() and today's date show (0: the clock).
  Renderer(std::string_view source, ChatTokens tokens, std::time_t now = 0);

  const Caps& caps() const { return caps_; }
  const std::string& source() const { return source_; }
  const ChatTokens& tokens() const { return tokens_; }

  // The prompt as runs of template text and input (message content, tools).
  // Throws InvalidArgument (jinja::Error) when the template refuses the
  // conversation (raise_exception) or a limit is reached.
  std::vector<TextSegment> render(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                                  std::span<const ChatTool> tools,
                                  const nlohmann::ordered_json* kwargs) const;

 private:
  std::string source_;
  ChatTokens tokens_;
  std::time_t now_;
  jinja::Template tmpl_;
  Caps caps_;
  bool thinking_ = true;  // enable_thinking unless the client sets it
};

}  // namespace tern::chat_jinja
