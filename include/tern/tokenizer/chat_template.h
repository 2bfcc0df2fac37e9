#pragma once
// Chat templates: turn a conversation into the prompt text a model was trained
// on. tern does not run Jinja; it recognises the template family from
// distinctive markers in tokenizer.chat_template and formats natively:
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
// Tools (chat_tools.cpp): ChatML writes Qwen 2.5's Hermes-style section (a
// <tools> block in the system turn, calls as <tool_call> JSON, results as
// <tool_response> in a user turn); Llama 3 its JSON form (tools in the first
// user turn, results in an "ipython" turn); Gemma and Llama 2, whose templates
// have no tool section, the generic fallback: the ChatML texts as plain
// content (instructions in the system text, results in a user turn).
// The output never starts with a BOS token: the tokenizer adds BOS when the
// vocabulary asks for it (as llama.cpp's chat templates do).
//
// Message content is user text. encode_chat() tokenizes the template's markers
// as control tokens and the content with special-token parsing off, so a
// message that spells "<|im_end|>\n<|im_start|>system" cannot forge a turn
// (llama.cpp's server does the same for chat content).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/tokenizer/tokenizer.h"

namespace tern {

namespace gguf {
class GgufFile;
}

// A call the assistant made (history), as the API gave it.
struct ChatToolCall {
  std::string name;
  std::string arguments;  // JSON text (an object)
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::vector<ChatToolCall> tool_calls{};  // assistant only
};

// A function the model may call (see "Tool calling" in README.md).
struct ChatTool {
  std::string name;
  std::string description;
  std::string parameters;  // JSON Schema text
};

// How a template's model writes a call: tagged, between `open` and `close`
// ({"name": ..., "<args_key>": {...}} inside), or bare (open empty: the reply
// is the JSON object).
struct ChatToolFormat {
  std::string open, close, args_key;
};

class ChatTemplate {
 public:
  enum class Kind { ChatML, Llama3, Gemma, Llama2, SmolVLM };

  // Reads tokenizer.chat_template (missing -> ChatML, with a warning).
  static ChatTemplate from_gguf(const gguf::GgufFile& f);
  static ChatTemplate from_string(std::string_view jinja_source);
  static ChatTemplate of_kind(Kind kind, std::string default_system_prompt = {});

  Kind kind() const { return kind_; }
  std::string_view name() const;  // "chatml", "llama3", "gemma", "llama2", "smolvlm"

  // Formats the conversation; add_generation_prompt appends the header that
  // starts the assistant's turn. Throws InvalidArgument for a role the format
  // cannot express.
  // `tools`: the functions offered (none: no tool section).
  std::string apply(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                    std::span<const ChatTool> tools = {}) const;

  // The same prompt as runs of template text (parse_special) and message
  // content (not parsed); their concatenation is apply()'s text.
  std::vector<TextSegment> segments(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                                    std::span<const ChatTool> tools = {}) const;

  // How this template's model writes tool calls.
  ChatToolFormat tool_format() const;

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
};

// The conversation's prompt token ids: BOS if the vocabulary asks for it, the
// template's markers as control tokens, message content never parsed for
// special tokens. Throws InvalidArgument like ChatTemplate::apply.
std::vector<int32_t> encode_chat(const Tokenizer& tok, const ChatTemplate& tmpl,
                                 std::span<const ChatMessage> msgs, bool add_generation_prompt,
                                 std::span<const ChatTool> tools = {});

}  // namespace tern
