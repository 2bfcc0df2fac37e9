#include "tern/server/anthropic_messages.h"

#include <limits>
#include <optional>

#include "api_exchange.h"
#include "json_fields.h"
#include "openai_tools.h"
#include "tern/sampling/reasoning_split.h"
#include "tern/server/media_translate.h"
#include "tern/server/openai_response.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;

// Content blocks: text, an assistant's tool_use blocks (its calls), a user's
// tool_result blocks (tool messages, ahead of the user's own text).
void parse_blocks(const json& blocks, const std::string& where, const std::string& role,
                  GenerationRequest& r) {
  json text = json::array();
  std::vector<MessageToolCall> calls;
  for (size_t j = 0; j < blocks.size(); ++j) {
    const json& b = blocks[j];
    const std::string bw = where + ".content[" + std::to_string(j) + "]";
    const json* type = b.is_object() ? field(b, "type") : nullptr;
    if (type && *type == "tool_use" && role == "assistant") {
      MessageToolCall c;
      if (!get_string(b, "id", c.id)) missing(bw + ".id");
      if (!get_string(b, "name", c.name)) missing(bw + ".name");
      const json* input = field(b, "input");
      c.arguments = input ? input->dump() : "{}";
      calls.push_back(std::move(c));
    } else if (type && *type == "tool_result" && role == "user") {
      Message t{"tool", ""};
      if (!get_string(b, "tool_use_id", t.tool_call_id)) missing(bw + ".tool_use_id");
      if (const json* c = field(b, "content"))
        t.content = text_content(*c, bw + ".content", {"text"});
      r.messages.push_back(std::move(t));
    } else {
      text.push_back(b);
    }
  }
  std::string t = text.empty() ? "" : text_content(text, where + ".content", {"text"});
  if (t.empty() && calls.empty() && !r.messages.empty() && r.messages.back().role == "tool") return;
  r.messages.push_back({role, std::move(t)});
  r.messages.back().tool_calls = std::move(calls);
}

void parse_messages(const json& body, GenerationRequest& r, UnknownFields unknown) {
  const json* msgs = field(body, "messages");
  if (!msgs) missing("messages");
  if (!msgs->is_array()) wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) bad_value("messages", "at least one message is required.");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) wrong_type(where, "an object", m);
    check_fields(m, "messages[].", {"role", "content"}, unknown);
    std::string role;
    if (!get_string(m, "role", role)) missing(where + ".role");
    if (role != "user" && role != "assistant")
      bad_value(where + ".role",
                "'" + role + "' is not supported. Expected 'user' or 'assistant'.");
    const json* c = field(m, "content");
    if (!c) missing(where + ".content");
    if (c->is_array()) {
      parse_blocks(*c, where, role, r);
      continue;
    }
    r.messages.push_back({role, text_content(*c, where + ".content", {"text"})});
  }
  if (r.messages.back().role == "assistant")
    unsupported("messages", "a final assistant message (prefill) is not supported.");
}

void parse_sampling(const json& body, GenerationRequest& r) {
  SamplingParams& p = r.params;
  int64_t i = 0;
  double d = 0;
  if (!get_int(body, "max_tokens", i)) missing("max_tokens");
  if (i < 1) bad_value("max_tokens", std::to_string(i) + " is less than the minimum of 1.");
  p.max_tokens = int(std::min<int64_t>(i, std::numeric_limits<int>::max()));
  r.max_tokens_given = true;
  if (get_number(body, "temperature", d)) {
    check_range("temperature", d, 0.0, 1.0);
    p.temperature = float(d);
  }
  if (get_number(body, "top_p", d)) {
    check_range("top_p", d, 0.0, 1.0);
    p.top_p = d == 0.0 ? 1.0f : float(d);
    if (d == 0.0) p.top_k = 1;
  }
  if (get_int(body, "top_k", i)) {
    if (i < 0) bad_value("top_k", "must be >= 0.");
    p.top_k = int(std::min<int64_t>(i, std::numeric_limits<int>::max()));
  }
  if (const json* v = field(body, "stop_sequences")) {
    if (!v->is_array()) wrong_type("stop_sequences", "an array of strings", *v);
    for (const auto& s : *v) {
      if (!s.is_string()) wrong_type("stop_sequences", "an array of strings", s);
      if (s.get<std::string>().empty()) bad_value("stop_sequences", "must not be empty strings.");
      p.stop.push_back(s.get<std::string>());
    }
    if (p.stop.size() > kMaxStopStrings)
      bad_value("stop_sequences",
                "at most " + std::to_string(kMaxStopStrings) + " stop sequences are allowed.");
  }
  try {
    p.validate();
  } catch (const InvalidArgument& e) {
    throw ApiError::bad_request(e.what());
  }
}

// Structured output and extended thinking are known but not supported (their neutral values
// pass).
void reject_unsupported(const json& body) {
  if (const json* v = field(body, "output_config")) {
    if (!v->is_object()) wrong_type("output_config", "an object", *v);
    if (field(*v, "format"))
      unsupported("output_config.format", "structured output is not supported.");
  }
  if (const json* v = field(body, "thinking")) {
    const json* t = v->is_object() ? field(*v, "type") : nullptr;
    if (!t || *t != "disabled") unsupported("thinking", "extended thinking is not supported.");
  }
}

// tools: [{name, description, input_schema}]; tool_choice: {type: auto | any
// | tool (with name) | none, disable_parallel_tool_use}. Read as the chat fields.
void parse_anthropic_tools(const json& body, GenerationRequest& r) {
  json chat = json::object();
  if (const json* v = field(body, "tools")) {
    if (!v->is_array()) wrong_type("tools", "an array", *v);
    json tools = json::array();
    for (const json& t : *v) {
      const json* type = t.is_object() ? field(t, "type") : nullptr;
      if (!t.is_object() || (type && *type != "custom")) {
        tools.push_back(t.is_object() ? json{{"type", *type}} : t);  // named as unsupported
        continue;
      }
      json f{{"name", t.value("name", json())}};
      if (t.contains("description")) f["description"] = t["description"];
      if (t.contains("input_schema")) f["parameters"] = t["input_schema"];
      tools.push_back(json{{"type", "function"}, {"function", std::move(f)}});
    }
    chat["tools"] = std::move(tools);
  }
  if (const json* v = field(body, "tool_choice")) {
    if (!v->is_object()) wrong_type("tool_choice", "an object", *v);
    const std::string type = v->value("type", "");
    if (type == "auto" || type == "none")
      chat["tool_choice"] = type;
    else if (type == "any")
      chat["tool_choice"] = "required";
    else if (type == "tool")
      chat["tool_choice"] =
          json{{"type", "function"}, {"function", {{"name", v->value("name", "")}}}};
    else
      bad_value("tool_choice.type",
                "'" + type + "' is not one of 'auto', 'any', 'tool' or 'none'.");
    bool disable = false;
    get_bool(*v, "disable_parallel_tool_use", disable);
    chat["parallel_tool_calls"] = !disable;
  }
  parse_tools(chat, r);
}

}  // namespace

GenerationRequest parse_anthropic_request(const json& body, UnknownFields unknown) {
  check_fields(body, "",
               {"model", "messages", "system", "max_tokens", "stop_sequences", "temperature",
                "top_p", "top_k", "stream", "metadata", "service_tier", "tools", "tool_choice",
                "thinking", "output_config"},
               unknown);
  GenerationRequest r;
  r.kind = GenerationRequest::Kind::Chat;
  get_string(body, "model", r.model);
  reject_unsupported(body);
  if (const json* s = field(body, "system")) {
    std::string text = text_content(*s, "system", {"text"});
    if (!text.empty()) r.messages.push_back({"system", std::move(text)});
  }
  parse_messages(body, r, unknown);
  parse_sampling(body, r);
  parse_anthropic_tools(body, r);
  get_bool(body, "stream", r.stream);
  return r;
}

const char* anthropic_stop_reason(const sched::Finish& f) {
  if (f.reason == sched::FinishReason::Length) return "max_tokens";
  return f.stop_string.empty() ? "end_turn" : "stop_sequence";
}

// The stop sequence that ended it, or null.
json anthropic_stop_sequence(const sched::Finish& f) {
  return f.stop_string.empty() ? json(nullptr) : json(f.stop_string);
}

json anthropic_usage(const sched::Usage& u) {
  return json{{"input_tokens", u.prompt_tokens - u.cached_tokens},
              {"output_tokens", u.completion_tokens},
              {"cache_read_input_tokens", u.cached_tokens},
              {"cache_creation_input_tokens", 0}};
}

json anthropic_message(const std::string& id, const std::string& model, const std::string& text,
                       const sched::Finish& f) {
  return json{{"id", id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", json::array({{{"type", "text"}, {"text", text}}})},
              {"stop_reason", anthropic_stop_reason(f)},
              {"stop_sequence", anthropic_stop_sequence(f)},
              {"usage", anthropic_usage(f.usage)}};
}

json anthropic_error_body(const ApiError& e) {
  const char* type = "api_error";
  switch (e.status()) {
    case 400:
      type = "invalid_request_error";
      break;
    case 401:
      type = "authentication_error";
      break;
    case 403:
      type = "permission_error";
      break;
    case 404:
    case 405:
      type = "not_found_error";
      break;
    case 413:
      type = "request_too_large";
      break;
    case 429:
      type = "rate_limit_error";
      break;
    case 503:
      type = "overloaded_error";
      break;
    default:
      type = e.status() < 500 ? "invalid_request_error" : "api_error";
  }
  return json{{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

namespace {

// The event sequence: message_start, content_block_start, content_block_delta
// (text_delta) per piece, content_block_stop, message_delta (stop_reason,
// usage), message_stop; an engine failure is an `error` event.
class AnthropicExchange final : public ApiExchange {
 public:
  AnthropicExchange(ServerContext& ctx, const std::string& rid) : ctx_(ctx), id_("msg_" + rid) {}

  GenerationRequest parse(const json& raw) override {
    ImageList images;
    const json body = anthropic_with_media_markers(ctx_.media, raw, images);
    GenerationRequest g = parse_text(body);
    g.images = std::move(images);
    return g;
  }

  GenerationRequest parse_text(const json& body) {
    // A reasoning model (--reasoning-format) thinks whether asked or not;
    // `thinking: {type: enabled}` shows that thinking as thinking blocks, as
    // Anthropic's extended thinking does. budget_tokens is not enforced
    // beyond max_tokens. Without it, only the answer is returned.
    if (ctx_.split_reasoning) {
      const json* t = body.is_object() ? field(body, "thinking") : nullptr;
      const json* type = t && t->is_object() ? field(*t, "type") : nullptr;
      if (type && *type == "enabled") {
        json rest = body;
        rest.erase("thinking");
        show_thinking_ = true;
        GenerationRequest g = parse_anthropic_request(rest, ctx_.unknown_fields());
        tools_ = g.uses_tools();
        return g;
      }
    }
    GenerationRequest g = parse_anthropic_request(body, ctx_.unknown_fields());
    tools_ = g.uses_tools();
    return g;
  }

  std::string start(const Submission& s) override {
    json message = anthropic_message(id_, ctx_.model_id, "", sched::Finish{});
    message["content"] = json::array();
    message["stop_reason"] = nullptr;
    message["usage"] = anthropic_usage({s.prompt_tokens, 0, 0});
    std::string out = sse_event("message_start", {{"type", "message_start"}, {"message", message}});
    if (tools_) parser_.emplace(tool_syntax(ctx_));
    if (s.split_reasoning) {
      split_.emplace(s.in_reasoning);
      in_reasoning_ = s.in_reasoning;
      return out;  // blocks open as their text arrives
    }
    return out + open_block(Block::Text);
  }

  std::string stream_text(const std::string& text) override {
    if (!split_) return answer(text);
    return stream_parts(split_->push(text));
  }

  std::string stream_end(const sched::Finish& f) override {
    if (f.reason == sched::FinishReason::Error)
      return sse_event("error", anthropic_error_body(ApiError(500, "server_error",
                                                              "Generation failed: " + f.error)));
    std::string out;
    if (split_) out += stream_parts(split_->flush());
    if (parser_) out += answer_parts(parser_->flush());
    // The answer's block, even if empty (unless the reply is tool calls).
    if (block_ != Block::Text && n_calls_ == 0) out += open_block(Block::Text);
    return out + close_block() +
           sse_event(
               "message_delta",
               {{"type", "message_delta"},
                {"delta",
                 {{"stop_reason", stop_reason(f)}, {"stop_sequence", anthropic_stop_sequence(f)}}},
                {"usage", anthropic_usage(f.usage)}}) +
           sse_event("message_stop", {{"type", "message_stop"}});
  }

  json body(const std::string& text, const sched::Finish& f) override {
    if (!split_) return with_tool_use(anthropic_message(id_, ctx_.model_id, text, f), text, f);
    const auto parts = ReasoningSplitter::split(text, in_reasoning_);
    json m =
        with_tool_use(anthropic_message(id_, ctx_.model_id, parts.content, f), parts.content, f);
    if (show_thinking_ && !parts.reasoning.empty())
      m["content"].insert(m["content"].begin(), thinking_block(parts.reasoning));
    return m;
  }

 private:
  enum class Block { None, Thinking, Text, ToolUse };

  static json thinking_block(const std::string& thinking) {
    // No signature: tern's thinking is not encrypted or verified.
    return {{"type", "thinking"}, {"thinking", thinking}, {"signature", ""}};
  }

  std::string open_block(Block b) {
    std::string out = close_block();
    block_ = b;
    ++index_;
    const json block = b == Block::Text ? json{{"type", "text"}, {"text", ""}} : thinking_block("");
    return out + sse_event("content_block_start", {{"type", "content_block_start"},
                                                   {"index", index_},
                                                   {"content_block", block}});
  }

  std::string close_block() {
    if (block_ == Block::None) return {};
    block_ = Block::None;
    return sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  }

  std::string delta(const std::string& text) {
    return sse_event("content_block_delta", {{"type", "content_block_delta"},
                                             {"index", index_},
                                             {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }

  std::string stream_parts(const ReasoningSplitter::Parts& p) {
    std::string out;
    if (show_thinking_ && !p.reasoning.empty()) {
      if (block_ != Block::Thinking) out += open_block(Block::Thinking);
      out += sse_event("content_block_delta",
                       {{"type", "content_block_delta"},
                        {"index", index_},
                        {"delta", {{"type", "thinking_delta"}, {"thinking", p.reasoning}}}});
    }
    if (!p.content.empty()) {
      if (block_ != Block::Text) out += open_block(Block::Text);
      out += answer(p.content);
    }
    return out;
  }

  // Answer text: as is, or split into text and tool_use blocks.
  std::string answer(const std::string& text) {
    if (!parser_) return delta(text);
    return answer_parts(parser_->push(text));
  }

  // Each call is a tool_use block: start (empty input), one input_json_delta, stop.
  std::string answer_parts(const ToolCallParser::Parts& p) {
    std::string out;
    if (!p.content.empty()) {
      if (block_ != Block::Text) out += open_block(Block::Text);
      out += delta(p.content);
    }
    for (const ParsedToolCall& c : p.calls) {
      out += close_block();
      block_ = Block::ToolUse;
      ++index_;
      json block = tool_use_block(c);
      block["input"] = json::object();
      out += sse_event("content_block_start", {{"type", "content_block_start"},
                                               {"index", index_},
                                               {"content_block", std::move(block)}});
      out += sse_event("content_block_delta",
                       {{"type", "content_block_delta"},
                        {"index", index_},
                        {"delta", {{"type", "input_json_delta"}, {"partial_json", c.arguments}}}});
    }
    return out;
  }

  json tool_use_block(const ParsedToolCall& c) {
    return {{"type", "tool_use"},
            {"id", "toolu_" + id_.substr(4) + "_" + std::to_string(n_calls_++)},
            {"name", c.name},
            {"input", json::parse(c.arguments, nullptr, false)}};
  }

  const char* stop_reason(const sched::Finish& f) const {
    return n_calls_ > 0 && f.reason == sched::FinishReason::Stop ? "tool_use"
                                                                 : anthropic_stop_reason(f);
  }

  // Not streaming: the text block (if any text) and a tool_use block per call.
  json with_tool_use(json m, const std::string& text, const sched::Finish& f) {
    if (!tools_) return m;
    ToolCallParser parser(tool_syntax(ctx_));
    ToolCallParser::Parts a = parser.push(text), b = parser.flush();
    a.content += b.content;
    for (auto& c : b.calls) a.calls.push_back(std::move(c));
    m["content"] = json::array();
    if (!a.content.empty() || a.calls.empty())
      m["content"].push_back({{"type", "text"}, {"text", a.content}});
    for (const ParsedToolCall& c : a.calls) m["content"].push_back(tool_use_block(c));
    m["stop_reason"] = stop_reason(f);
    return m;
  }

  ServerContext& ctx_;
  std::string id_;
  std::optional<ReasoningSplitter> split_;  // a reasoning model's output
  bool in_reasoning_ = false;
  bool show_thinking_ = false;  // the request enabled thinking
  bool tools_ = false;          // tool_use blocks are parsed from the answer
  std::optional<ToolCallParser> parser_;
  int n_calls_ = 0;
  Block block_ = Block::None;  // the open content block
  int index_ = -1;             // its index
};

}  // namespace

std::unique_ptr<ApiExchange> make_anthropic_exchange(ServerContext& ctx, const std::string& rid) {
  return std::make_unique<AnthropicExchange>(ctx, rid);
}

}  // namespace tern::server
