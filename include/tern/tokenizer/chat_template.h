#pragma once
// Chat templates: turn a conversation into the prompt text a model was trained
// on.
//
// A model file's own template (tokenizer.chat_template, Jinja source) is run
// by tern's Jinja engine (src/jinja) with the conversation in the shape
// llama.cpp's server gives it, reshaped first where the template cannot take
// a message (found by probing the template once at load, see jinja_chat.cpp):
// a system message folded into the next turn for templates without a system
// role, call arguments as objects for templates that read them as dicts,
// "developer" read as "system" (except by gpt-oss), text content as typed
// parts for templates that only take those. --chat-template-file replaces a
// file's template; --chat-template NAME picks one of the built-in formats.
//
// The built-in formats are the fallback for a file with no template (or one
// the engine cannot parse, with a warning): tern recognises the family from
// distinctive markers and formats natively:
//
//   ChatML  "<|im_start|>"        <|im_start|>{role}\n{content}<|im_end|>\n ...
//                                  (SmolLM2, Qwen2, ...; a default system prompt
//                                  written into the template is injected when the
//                                  conversation does not start with a system message)
//   Llama3  "<|start_header_id|>" <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//   Gemma   "<start_of_turn>"     <start_of_turn>{user|model}\n{content}<end_of_turn>\n, the
//                                  system prompt folded into the first user turn
//   Llama2  "[INST]"              [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant}
//   </s><s>[INST] ...
//
// A missing or unrecognised template falls back to ChatML (with a warning).
//
// Tools (chat_tools.cpp, built-in formats): ChatML writes Qwen 2.5's
// Hermes-style section (a <tools> block in the system turn, calls as
// <tool_call> JSON, results as <tool_response> in a user turn); Llama 3 its
// JSON form (tools in the first user turn, results in an "ipython" turn);
// Gemma and Llama 2, whose templates have no tool section, the generic
// fallback: the ChatML texts as plain content (instructions in the system
// text, results in a user turn). A Jinja template is handed the tools list.
// The output never starts with a BOS token the tokenizer adds itself (a
// template that writes one has it removed, as llama.cpp does).
//
// Message content is user text. encode_chat() tokenizes the template's markers
// as control tokens and the content with special-token parsing off, so a
// message that spells "<|im_end|>\n<|im_start|>system" cannot forge a turn
// (llama.cpp's server does the same for chat content). Under Jinja every
// string the conversation brings (content, names, arguments, tools, kwargs)
// is marked as input through the render.
#include <cstdint>
#include <ctime>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/tokenizer/tokenizer.h"

namespace tern {

namespace gguf {
class GgufFile;
}
namespace chat_jinja {
class Renderer;
}

// A call the assistant made (history), as the API gave it.
struct ChatToolCall {
  std::string name;
  std::string arguments;  // JSON text (an object)
  std::string id{};       // as the API gave it ("" if none)
};

struct ChatMessage {
  std::string role;  // "system", "developer", "user", "assistant", "tool"
  std::string content;
  std::vector<ChatToolCall> tool_calls{};  // assistant only
  std::string tool_call_id{};              // tool: the call this answers
  std::string reasoning_content{};         // assistant: its thinking, when the client kept it
};

// The texts a template sees as bos_token and eos_token, and whether the
// tokenizer adds them itself (then a template's own leading BOS / trailing
// EOS is removed).
struct ChatTokens {
  std::string bos, eos;
  bool add_bos = false, add_eos = false;
};

// A function the model may call (see "Tool calling" in README.md).
struct ChatTool {
  std::string name;
  std::string description;
  std::string parameters;  // JSON Schema text
};

// How a template's model writes a call: tagged, between `open` and `close`
// ({"name": ..., "<args_key>": {...}} inside), or bare (open empty: the reply
// is the JSON object); as a JSON list of such objects after `open` (List); or
// as open + name + name_sep + arguments JSON + close (Named), or with the
// arguments as markup (Xml: key_open KEY key_close VALUE value_close each),
// the calls inside wrap_open ... wrap_close. (sampling/tool_calls.h parses them.)
struct ChatToolFormat {
  enum class Form : uint8_t { Object, List, Named, Xml };
  std::string open, close, args_key;
  Form form = Form::Object;
  std::string name_sep{}, wrap_open{}, wrap_close{};
  std::string key_open{}, key_close{}, value_close{};  // Xml: each argument's markers
};

class ChatTemplate {
 public:
  enum class Kind { ChatML, Llama3, Gemma, Llama2, SmolVLM, Jinja };

  // The file's own template (tokenizer.chat_template) run as Jinja; a file
  // without one (or whose template does not parse, with a warning) gets the
  // built-in format its markers name (missing -> ChatML, with a warning).
  static ChatTemplate from_gguf(const gguf::GgufFile& f, const Tokenizer& tok);
  // `source` run as Jinja (a Jinja syntax error throws InvalidArgument).
  // `now`: the instant the template's dates show (0: the clock at each render).
  static ChatTemplate from_jinja(std::string_view source, ChatTokens tokens, std::time_t now = 0);
  // The built-in format `source`'s markers name (no Jinja).
  static ChatTemplate from_string(std::string_view jinja_source);
  static ChatTemplate of_kind(Kind kind, std::string default_system_prompt = {});
  // A built-in format by name ("chatml", "llama3", "gemma", "llama2",
  // "smolvlm"); throws InvalidArgument naming the choices.
  static ChatTemplate of_name(std::string_view name);
  // The tokens `tok` gives templates.
  static ChatTokens tokens_of(const Tokenizer& tok);

  Kind kind() const { return kind_; }
  // "chatml", "llama3", "gemma", "llama2", "smolvlm", "jinja"
  std::string_view name() const;
  // Jinja: the template's source ("" for a built-in format).
  std::string_view source() const;
  // Jinja: what the template takes, as "system_role=1 tool_calls=0 ..." (for the log).
  std::string describe() const;

  // Formats the conversation; add_generation_prompt appends the header that
  // starts the assistant's turn. Throws InvalidArgument for a role the format
  // cannot express (or a conversation the Jinja template refuses).
  // `tools`: the functions offered (none: no tool section). `kwargs`: extra
  // template variables (chat_template_kwargs: a JSON object; Jinja only).
  std::string apply(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                    std::span<const ChatTool> tools = {},
                    const nlohmann::ordered_json* kwargs = nullptr) const;

  // The same prompt as runs of template text (parse_special) and message
  // content (not parsed); their concatenation is apply()'s text.
  std::vector<TextSegment> segments(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                                    std::span<const ChatTool> tools = {},
                                    const nlohmann::ordered_json* kwargs = nullptr) const;

  // How this template's model writes tool calls.
  ChatToolFormat tool_format() const;
  // Whether tool_format() was read off the template itself (a Jinja
  // template whose calls have a shape tern parses), not a default.
  bool tool_format_is_the_templates() const;

  // The system prompt the template injects when the conversation has none
  // ("" if it injects none).
  std::string default_system_prompt() const { return default_system_; }

 private:
  ChatTemplate(Kind kind, std::string default_system)
      : kind_(kind), default_system_(std::move(default_system)) {}
  class Prompt;
  void chatml(std::span<const ChatMessage> msgs, bool add_generation_prompt,
              std::span<const ChatTool> tools, Prompt& out) const;
  void llama3(std::span<const ChatMessage> msgs, bool add_generation_prompt,
              std::span<const ChatTool> tools, Prompt& out) const;
  void gemma(std::span<const ChatMessage> msgs, bool add_generation_prompt, Prompt& out) const;
  void llama2(std::span<const ChatMessage> msgs, bool add_generation_prompt, Prompt& out) const;
  void smolvlm(std::span<const ChatMessage> msgs, bool add_generation_prompt, Prompt& out) const;

  Kind kind_;
  std::string default_system_;
  std::shared_ptr<const chat_jinja::Renderer> jinja_;  // Kind::Jinja
};

// The conversation's prompt token ids: BOS if the vocabulary asks for it, the
// template's markers as control tokens, message content never parsed for
// special tokens. Throws InvalidArgument like ChatTemplate::apply.
std::vector<int32_t> encode_chat(const Tokenizer& tok, const ChatTemplate& tmpl,
                                 std::span<const ChatMessage> msgs, bool add_generation_prompt,
                                 std::span<const ChatTool> tools = {},
                                 const nlohmann::ordered_json* kwargs = nullptr);

}  // namespace tern
