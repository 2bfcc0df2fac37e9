#include "tern/server/anthropic_messages.h"

#include <limits>
#include <optional>

#include "json_fields.h"
#include "openai_tools.h"
#include "renderers.h"
#include "sampling_fields.h"
#include "tern/server/media_translate.h"
#include "tern/server/openai_bodies.h"

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
  if (!get_int(body, "max_tokens", i)) missing("max_tokens");
  if (i < 1) bad_value("max_tokens", std::to_string(i) + " is less than the minimum of 1.");
  p.max_tokens = int(std::min<int64_t>(i, std::numeric_limits<int>::max()));
  r.max_tokens_given = true;
  read_sampling(body, kAnthropicSampling, p);
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
  validate_sampling(p);
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

using Kind = AnswerEvent::Kind;

// The event sequence: message_start, content_block_start, content_block_delta
// (text_delta) per piece, content_block_stop, message_delta (stop_reason,
// usage), message_stop; an engine failure is an `error` event. Thinking and
// each tool call are blocks of their own.
class AnthropicRenderer final : public EventRenderer {
 public:
  explicit AnthropicRenderer(AnthropicRendering r) : r_(std::move(r)) {}

  std::string open() override {
    json message = anthropic_message(r_.id, r_.model, "", sched::Finish{});
    message["content"] = json::array();
    message["stop_reason"] = nullptr;
    message["usage"] = anthropic_usage({r_.prompt_tokens, 0, 0});
    std::string out = sse_event("message_start", {{"type", "message_start"}, {"message", message}});
    if (r_.blocks_on_demand) return out;
    return out + open_block(Block::Text);
  }

  json body(std::span<const ChoiceOutput> c) override {
    const Answer& a = c[0].answer;
    json m = anthropic_message(r_.id, r_.model, a.content, c[0].finish);
    if (!a.calls.empty()) {  // the text block (if any text) and a tool_use block per call
      m["content"] = json::array();
      if (!a.content.empty()) m["content"].push_back({{"type", "text"}, {"text", a.content}});
      for (size_t i = 0; i < a.calls.size(); ++i)
        m["content"].push_back(tool_use_block(i, a.calls[i].name, a.calls[i].arguments));
      m["stop_reason"] = stop_reason(a.calls.size(), c[0].finish);
    }
    if (r_.thinking_blocks && !a.reasoning.empty())
      m["content"].insert(m["content"].begin(), thinking_block(a.reasoning));
    return m;
  }

 private:
  enum class Block { None, Thinking, Text, ToolUse };

  std::string render_event(const AnswerEvent& e) override {
    switch (e.kind) {
      case Kind::Reasoning: {
        if (!r_.thinking_blocks) return {};
        std::string out = block_ != Block::Thinking ? open_block(Block::Thinking) : "";
        return out + block_delta({{"type", "thinking_delta"}, {"thinking", e.text}});
      }
      case Kind::Content: {
        std::string out = block_ != Block::Text ? open_block(Block::Text) : "";
        return out + block_delta({{"type", "text_delta"}, {"text", e.text}});
      }
      case Kind::Call: {  // start (empty input), one input_json_delta, stop
        std::string out = close_block();
        block_ = Block::ToolUse;
        ++index_;
        json block = tool_use_block(e.call, e.name, e.text);
        block["input"] = json::object();
        out += sse_event("content_block_start", {{"type", "content_block_start"},
                                                 {"index", index_},
                                                 {"content_block", std::move(block)}});
        return out + block_delta({{"type", "input_json_delta"}, {"partial_json", e.text}});
      }
      case Kind::CallStart:
      case Kind::CallArguments:
        return {};
      case Kind::End:
        break;
    }
    const sched::Finish& f = e.finish;
    if (f.reason == sched::FinishReason::Error)
      return sse_event("error", anthropic_error_body(ApiError(500, "server_error",
                                                              "Generation failed: " + f.error)));
    // The answer's block, even if empty (unless the reply is tool calls).
    std::string out = block_ != Block::Text && e.calls == 0 ? open_block(Block::Text) : "";
    return out + close_block() +
           sse_event("message_delta", {{"type", "message_delta"},
                                       {"delta",
                                        {{"stop_reason", stop_reason(e.calls, f)},
                                         {"stop_sequence", anthropic_stop_sequence(f)}}},
                                       {"usage", anthropic_usage(f.usage)}}) +
           sse_event("message_stop", {{"type", "message_stop"}});
  }

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

  std::string block_delta(json delta) {
    return sse_event(
        "content_block_delta",
        {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
  }

  json tool_use_block(size_t call, const std::string& name, const std::string& arguments) const {
    return {{"type", "tool_use"},
            {"id", "toolu_" + r_.id.substr(4) + "_" + std::to_string(call)},
            {"name", name},
            {"input", json::parse(arguments, nullptr, false)}};
  }

  static const char* stop_reason(size_t calls, const sched::Finish& f) {
    return calls > 0 && f.reason == sched::FinishReason::Stop ? "tool_use"
                                                              : anthropic_stop_reason(f);
  }

  AnthropicRendering r_;
  Block block_ = Block::None;  // the open content block
  int index_ = -1;             // its index
};

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

  AnswerOptions answer_options(const Submission& s, bool) override {
    return chat_answer(ctx_, s, tools_);
  }

  std::unique_ptr<AnswerRenderer> renderer(const Submission& s) override {
    return make_anthropic_renderer({.id = id_,
                                    .model = ctx_.model_id,
                                    .prompt_tokens = s.prompt_tokens,
                                    .thinking_blocks = show_thinking_,
                                    .blocks_on_demand = s.split_reasoning});
  }

 private:
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

  ServerContext& ctx_;
  std::string id_;
  bool show_thinking_ = false;  // the request enabled thinking
  bool tools_ = false;          // tool_use blocks are parsed from the answer
};

}  // namespace

std::unique_ptr<AnswerRenderer> make_anthropic_renderer(AnthropicRendering r) {
  return std::make_unique<AnthropicRenderer>(std::move(r));
}

std::unique_ptr<ApiExchange> make_anthropic_exchange(ServerContext& ctx, const std::string& rid) {
  return std::make_unique<AnthropicExchange>(ctx, rid);
}

}  // namespace tern::server
