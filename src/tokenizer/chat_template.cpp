// Chat template recognition and native formatting (see chat_template.h).
#include "tern/tokenizer/chat_template.h"

#include <nlohmann/json.hpp>

#include "chat_tools.h"
#include "jinja_chat.h"
#include "tern/core/error.h"
#include "tern/core/log.h"
#include "tern/gguf/gguf_file.h"

namespace tern {
namespace {

bool contains(std::string_view s, std::string_view what) {
  return s.find(what) != std::string_view::npos;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Leading and trailing ASCII whitespace removed (Jinja's |trim on the texts that matter).
std::string trim(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// Resolves the escapes a Jinja string literal may contain.
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    out.push_back(c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c);
  }
  return out;
}

// A ChatML template that writes a fixed system turn, like SmolLM2's
//   {{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, ...<|im_end|>\n' }}
// injects that prompt when the conversation has no system message. Returns the
// first such literal prompt ("" if the template only ever copies the caller's).
std::string find_default_system_prompt(std::string_view src) {
  static constexpr std::string_view kHead = "<|im_start|>system";
  static constexpr std::string_view kEnd = "<|im_end|>";
  for (size_t at = src.find(kHead); at != std::string_view::npos; at = src.find(kHead, at + 1)) {
    size_t p = at + kHead.size();
    if (src.compare(p, 1, "\n") == 0) {
      p += 1;
    } else if (src.compare(p, 2, "\\n") == 0) {
      p += 2;
    } else {
      continue;
    }
    const size_t end = src.find(kEnd, p);
    if (end == std::string_view::npos) break;
    const std::string_view body = src.substr(p, end - p);
    // Anything that leaves the string literal ('...' + var, {{ }}, {% %}) is not a fixed prompt.
    if (body.empty() || body.find_first_of("'\"{}%") != std::string_view::npos) continue;
    return unescape(body);
  }
  return {};
}

// The built-in formats read "developer" as "system" (as OpenAI defines it).
std::vector<ChatMessage> developer_as_system(std::span<const ChatMessage> msgs) {
  std::vector<ChatMessage> out(msgs.begin(), msgs.end());
  for (ChatMessage& m : out)
    if (m.role == "developer") m.role = "system";
  return out;
}

void check_role(const ChatMessage& m, std::string_view tmpl, bool allow_tool) {
  if (m.role == "system" || m.role == "user" || m.role == "assistant" ||
      (allow_tool && m.role == "tool"))
    return;
  throw InvalidArgument("chat template '" + std::string(tmpl) + "': unsupported message role '" +
                        m.role + "'");
}

}  // namespace

ChatTemplate ChatTemplate::from_string(std::string_view src) {
  // SmolVLM's template starts with <|im_start|> (its BOS) but its turns are
  // "User: ...<end_of_utterance>", not ChatML's (llama.cpp tells them apart the same way).
  if (contains(src, "<end_of_utterance>")) return ChatTemplate(Kind::SmolVLM, {});
  if (contains(src, "<|im_start|>"))
    return ChatTemplate(Kind::ChatML, find_default_system_prompt(src));
  if (contains(src, "<|start_header_id|>") && contains(src, "<|end_header_id|>"))
    return ChatTemplate(Kind::Llama3, {});
  if (contains(src, "<start_of_turn>")) return ChatTemplate(Kind::Gemma, {});
  if (contains(src, "[INST]")) return ChatTemplate(Kind::Llama2, {});
  if (src.empty()) {
    log::get("tokenizer")->warn("no chat template; using ChatML");
  } else {
    log::get("tokenizer")->warn("unrecognised chat template ({} bytes); using ChatML", src.size());
  }
  return ChatTemplate(Kind::ChatML, {});
}

ChatTemplate ChatTemplate::from_gguf(const gguf::GgufFile& f, const Tokenizer& tok) {
  const std::string src = f.get_string_or("tokenizer.chat_template", "");
  // Gemma base (pretrained) files ship no template but a vocabulary with the
  // turn markers: use Gemma's own turns rather than ChatML, whose markers the
  // vocabulary lacks.
  if (src.empty() && f.get_string_or("general.architecture", "").starts_with("gemma")) {
    return ChatTemplate(Kind::Gemma, {});
  }
  if (src.empty()) return from_string(src);
  try {
    return from_jinja(src, tokens_of(tok));
  } catch (const InvalidArgument& e) {
    ChatTemplate t = from_string(src);
    log::get("tokenizer")
        ->warn("the file's chat template does not run ({}); using the built-in '{}' format",
               e.what(), t.name());
    return t;
  }
}

ChatTemplate ChatTemplate::from_jinja(std::string_view source, ChatTokens tokens, std::time_t now) {
  ChatTemplate t(Kind::Jinja, {});
  t.jinja_ = std::make_shared<const chat_jinja::Renderer>(source, std::move(tokens), now);
  return t;
}

ChatTokens ChatTemplate::tokens_of(const Tokenizer& tok) {
  ChatTokens t;
  if (tok.bos() >= 0) t.bos = tok.token_text(tok.bos());
  if (tok.eos() >= 0) t.eos = tok.token_text(tok.eos());
  t.add_bos = tok.add_bos_default();
  return t;
}

ChatTemplate ChatTemplate::of_name(std::string_view name) {
  for (Kind k : {Kind::ChatML, Kind::Llama3, Kind::Gemma, Kind::Llama2, Kind::SmolVLM}) {
    ChatTemplate t(k, {});
    if (t.name() == name) return t;
  }
  throw InvalidArgument("unknown chat template '" + std::string(name) +
                        "' (built-in formats: chatml, llama3, gemma, llama2, smolvlm; "
                        "--chat-template-file FILE reads a Jinja template)");
}

std::string_view ChatTemplate::source() const {
  return jinja_ ? std::string_view(jinja_->source()) : std::string_view();
}

namespace {

// A call in the format, as '<tool_call>{"name", "arguments"}</tool_call>'.
std::string describe_call(const ChatToolFormat& f) {
  std::string body;
  switch (f.form) {
    case ChatToolFormat::Form::Object:
      body = "{\"name\", \"" + f.args_key + "\"}";
      break;
    case ChatToolFormat::Form::List:
      body = "[{\"name\", \"" + f.args_key + "\"}, ...]";
      break;
    case ChatToolFormat::Form::Named:
      body = "NAME" + f.name_sep + "{...}";
      break;
    case ChatToolFormat::Form::Xml:
      body =
          "NAME" + f.name_sep + f.key_open + "KEY" + f.key_close + "VALUE" + f.value_close + "...";
      break;
  }
  const std::string one = f.open + body + f.close;
  if (f.wrap_open.empty() && f.wrap_close.empty()) return "'" + one + "'";
  return "'" + f.wrap_open + one + "..." + f.wrap_close + "'";
}

}  // namespace

std::string ChatTemplate::describe() const {
  if (!jinja_) return std::string(name());
  const chat_jinja::Caps& c = jinja_->caps();
  auto flag = [](const char* n, bool v) { return std::string(n) + (v ? "=yes" : "=no"); };
  return "jinja (" + flag("system_role", c.system_role) + " " + flag("tools", c.tools) + " " +
         flag("tool_calls", c.tool_calls) + " " + flag("object_arguments", c.object_arguments) +
         " " + flag("string_content", c.string_content) +
         " calls=" + (c.call_format ? describe_call(*c.call_format) : std::string("unknown")) + ")";
}

ChatTemplate ChatTemplate::of_kind(Kind kind, std::string default_system_prompt) {
  return ChatTemplate(kind, std::move(default_system_prompt));
}

std::string_view ChatTemplate::name() const {
  switch (kind_) {
    case Kind::ChatML:
      return "chatml";
    case Kind::Llama3:
      return "llama3";
    case Kind::Gemma:
      return "gemma";
    case Kind::Llama2:
      return "llama2";
    case Kind::SmolVLM:
      return "smolvlm";
    case Kind::Jinja:
      return "jinja";
  }
  return "?";
}

// A prompt under construction: template text (markers parsed as control
// tokens) and message content (literal), adjacent runs of one kind merged.
class ChatTemplate::Prompt {
 public:
  Prompt& markup(std::string_view s) { return add(s, true); }
  Prompt& content(std::string_view s) { return add(s, false); }
  std::vector<TextSegment> take() { return std::move(segs_); }

 private:
  Prompt& add(std::string_view s, bool parse_special) {
    if (s.empty()) return *this;
    if (segs_.empty() || segs_.back().parse_special != parse_special)
      segs_.push_back({std::string(), parse_special});
    segs_.back().text.append(s);
    return *this;
  }
  std::vector<TextSegment> segs_;
};

std::vector<TextSegment> ChatTemplate::segments(std::span<const ChatMessage> all,
                                                bool add_generation_prompt,
                                                std::span<const ChatTool> tools,
                                                const nlohmann::ordered_json* kwargs) const {
  if (jinja_) return jinja_->render(all, add_generation_prompt, tools, kwargs);
  const std::vector<ChatMessage> mapped = developer_as_system(all);
  const std::span<const ChatMessage> msgs = mapped;
  Prompt p;
  switch (kind_) {
    case Kind::ChatML:
      chatml(msgs, add_generation_prompt, tools, p);
      break;
    case Kind::Llama3:
      llama3(msgs, add_generation_prompt, tools, p);
      break;
    case Kind::Gemma:
      gemma(chat_tools::lower_generic(msgs, tools), add_generation_prompt, p);
      break;
    case Kind::Llama2:
      llama2(chat_tools::lower_generic(msgs, tools), add_generation_prompt, p);
      break;
    case Kind::SmolVLM:
      smolvlm(chat_tools::lower_generic(msgs, tools), add_generation_prompt, p);
      break;
    case Kind::Jinja:
      break;
  }
  return p.take();
}

std::string ChatTemplate::apply(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                                std::span<const ChatTool> tools,
                                const nlohmann::ordered_json* kwargs) const {
  std::string out;
  for (const TextSegment& s : segments(msgs, add_generation_prompt, tools, kwargs)) out += s.text;
  return out;
}

bool ChatTemplate::tool_format_is_the_templates() const {
  return jinja_ && jinja_->caps().call_format.has_value();
}

ChatToolFormat ChatTemplate::tool_format() const {
  // A Jinja template's model writes calls the way its template writes them
  // in the history (read off a render at load); otherwise Hermes'
  // <tool_call> tags, or Llama 3's bare JSON for a Llama 3 template.
  if (jinja_ && jinja_->caps().call_format) return *jinja_->caps().call_format;
  const std::string_view src = source();
  const bool llama3 = kind_ == Kind::Llama3 ||
                      (jinja_ && !contains(src, "<tool_call>") &&
                       contains(src, "<|start_header_id|>") && contains(src, "parameters"));
  if (llama3) return {"", "", "parameters"};
  return {std::string(chat_tools::kCallOpen), std::string(chat_tools::kCallClose), "arguments"};
}

// Contents verbatim, as the ChatML templates write them. The default system
// prompt comes from the model file, so it counts as template text. Tools as
// Qwen 2.5's template writes them: the section after the system text, each
// call after the assistant's text, consecutive tool results in one user turn.
void ChatTemplate::chatml(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                          std::span<const ChatTool> tools, Prompt& out) const {
  size_t first = 0;
  if (!tools.empty()) {
    out.markup("<|im_start|>system\n");
    if (!msgs.empty() && msgs[0].role == "system") {
      out.content(msgs[0].content);
      first = 1;
    } else {
      out.markup(default_system_);
    }
    out.content(chat_tools::hermes_section(tools)).markup("<|im_end|>\n");
  } else if (!msgs.empty() && msgs[0].role != "system" && !default_system_.empty()) {
    out.markup("<|im_start|>system\n" + default_system_ + "<|im_end|>\n");
  }
  for (size_t i = first; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    check_role(m, name(), /*allow_tool=*/true);
    if (m.role == "tool") {
      if (i == 0 || msgs[i - 1].role != "tool") out.markup("<|im_start|>user");
      out.markup("\n<tool_response>\n").content(m.content).markup("\n</tool_response>");
      if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") out.markup("<|im_end|>\n");
      continue;
    }
    if (m.role != "assistant" || m.tool_calls.empty()) {
      out.markup("<|im_start|>" + m.role + "\n").content(m.content).markup("<|im_end|>\n");
      continue;
    }
    out.markup("<|im_start|>assistant");
    if (!m.content.empty()) out.markup("\n").content(m.content);
    for (const ChatToolCall& c : m.tool_calls)
      out.markup("\n<tool_call>\n")
          .content(chat_tools::call_json(c, "arguments"))
          .markup("\n</tool_call>");
    out.markup("<|im_end|>\n");
  }
  if (add_generation_prompt) out.markup("<|im_start|>assistant\n");
}

// Contents trimmed, as Llama 3's template does (its leading bos_token is left to the tokenizer).
// Tools as Llama 3.1/3.2 write them: the guidance and the list in front of the
// first user message, a call as the assistant's whole reply
// ({"name": ..., "parameters": ...}; several joined by "; "), results in "ipython" turns.
void ChatTemplate::llama3(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                          std::span<const ChatTool> tools, Prompt& out) const {
  bool preamble = !tools.empty();
  for (const ChatMessage& m : msgs) {
    check_role(m, name(), /*allow_tool=*/true);
    const std::string role = m.role == "tool" ? "ipython" : m.role;
    out.markup("<|start_header_id|>" + role + "<|end_header_id|>\n\n");
    if (preamble && m.role == "user") {
      out.content(chat_tools::llama3_preamble(tools));
      preamble = false;
    }
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      std::string calls;
      for (const ChatToolCall& c : m.tool_calls)
        calls.append(calls.empty() ? "" : "; ").append(chat_tools::call_json(c, "parameters"));
      out.content(calls).markup("<|eot_id|>");
      continue;
    }
    out.content(trim(m.content)).markup("<|eot_id|>");
  }
  if (add_generation_prompt) out.markup("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Gemma has no system role: system text goes in front of the next user turn.
void ChatTemplate::gemma(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                         Prompt& out) const {
  std::string system;
  for (const ChatMessage& m : msgs) {
    check_role(m, name(), /*allow_tool=*/false);
    if (m.role == "system") {
      system += trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out.markup("<start_of_turn>" + role + "\n");
    if (!system.empty() && role != "model") {
      out.content(system + "\n\n");
      system.clear();
    }
    out.content(trim(m.content)).markup("<end_of_turn>\n");
  }
  if (add_generation_prompt) out.markup("<start_of_turn>model\n");
}

// Llama 2 chat: the first system message is wrapped in <<SYS>> inside the first
// user turn; every later user turn starts with <s> (the first BOS is the tokenizer's).
// <<SYS>> is plain text in Llama 2's vocabulary, so it travels with the content.
void ChatTemplate::llama2(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                          Prompt& out) const {
  std::string system;
  size_t first = 0;
  if (!msgs.empty() && msgs[0].role == "system") {
    system = msgs[0].content;
    first = 1;
  }
  for (size_t i = first; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    check_role(m, name(), /*allow_tool=*/false);
    if (m.role == "system") {
      throw InvalidArgument("chat template 'llama2': a system message may only come first");
    }
    std::string content = m.content;
    if (i == first && !system.empty()) content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
    if (m.role == "user") {
      out.markup(i == first ? "[INST] " : "<s>[INST] ").content(trim(content)).markup(" [/INST]");
    } else {
      out.markup(" ").content(trim(content)).markup(" </s>");
    }
  }
  (void)add_generation_prompt;  // the assistant's turn starts right after [/INST]
}

// SmolVLM (Idefics3), as llama.cpp's built-in "smolvlm" format writes it:
// <|im_start|> once, system text followed by a blank line, "User: " and
// "Assistant: " turns each closed by "<end_of_utterance>\n", and "Assistant:"
// to start the reply. (The Jinja original drops the space after "User:" when
// the turn opens with an image; llama.cpp keeps it, and so does tern.)
void ChatTemplate::smolvlm(std::span<const ChatMessage> msgs, bool add_generation_prompt,
                           Prompt& out) const {
  out.markup("<|im_start|>");
  for (const ChatMessage& m : msgs) {
    check_role(m, name(), /*allow_tool=*/false);
    if (m.role == "system") {
      out.content(m.content).markup("\n\n");
      continue;
    }
    out.markup(m.role == "user" ? "User: " : "Assistant: ")
        .content(m.content)
        .markup("<end_of_utterance>\n");
  }
  if (add_generation_prompt) out.markup("Assistant:");
}

std::vector<int32_t> encode_chat(const Tokenizer& tok, const ChatTemplate& tmpl,
                                 std::span<const ChatMessage> msgs, bool add_generation_prompt,
                                 std::span<const ChatTool> tools,
                                 const nlohmann::ordered_json* kwargs) {
  return tok.encode(tmpl.segments(msgs, add_generation_prompt, tools, kwargs), /*add_bos=*/true);
}

}  // namespace tern
