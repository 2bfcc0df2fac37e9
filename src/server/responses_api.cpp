#include "tern/server/responses_api.h"

#include <limits>
#include <optional>

#include "json_fields.h"
#include "openai_tools.h"
#include "renderers.h"
#include "sampling_fields.h"
#include "tern/core/random_id.h"
#include "tern/server/media_translate.h"
#include "tern/server/openai_bodies.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;

// One input item: a message (`type` "message" or absent) with string content
// or input_text / output_text parts. Other item types (function calls,
// references) are refused; reasoning items (a client passing back a previous
// output whole) are skipped by parse_input, as chat templates drop old thinking.
// A function_call item (an earlier call, as the output gave it) or a
// function_call_output item (its result, for the tool message).
Message parse_call_item(const json& item, const std::string& where, const std::string& type) {
  std::string call_id;
  if (!get_string(item, "call_id", call_id)) missing(where + ".call_id");
  if (type == "function_call_output") {
    const json* out = field(item, "output");
    if (!out) missing(where + ".output");
    Message m{"tool", out->is_string() ? out->get<std::string>() : out->dump()};
    m.tool_call_id = call_id;
    return m;
  }
  MessageToolCall c{call_id, "", "{}"};
  if (!get_string(item, "name", c.name)) missing(where + ".name");
  get_string(item, "arguments", c.arguments);
  if (json::parse(c.arguments, nullptr, false).is_discarded())
    bad_value(where + ".arguments", "the arguments are not valid JSON.");
  Message m{"assistant", ""};
  m.tool_calls.push_back(std::move(c));
  return m;
}

Message parse_item(const json& item, size_t i, UnknownFields unknown) {
  const std::string where = "input[" + std::to_string(i) + "]";
  if (!item.is_object()) wrong_type(where, "an object", item);
  check_fields(
      item, "input[].",
      {"type", "role", "content", "id", "status", "call_id", "name", "arguments", "output"},
      unknown);
  std::string type = "message";
  get_string(item, "type", type);
  if (type == "function_call" || type == "function_call_output")
    return parse_call_item(item, where, type);
  if (type != "message")
    unsupported(where + ".type", "input items of type '" + type +
                                     "' are not supported; only 'message', 'function_call' and "
                                     "'function_call_output' are.");
  std::string role;
  if (!get_string(item, "role", role)) missing(where + ".role");
  if (role == "developer") role = "system";
  if (role != "user" && role != "assistant" && role != "system")
    bad_value(where + ".role", "'" + role +
                                   "' is not supported. Supported values are: 'user', "
                                   "'assistant', 'system' and 'developer'.");
  const json* c = field(item, "content");
  if (!c) missing(where + ".content");
  return {role, text_content(*c, where + ".content", {"input_text", "output_text"})};
}

std::vector<Message> parse_input(const json& body, UnknownFields unknown) {
  const json* in = field(body, "input");
  if (!in) missing("input");
  if (in->is_string()) return {{"user", in->get<std::string>()}};
  if (!in->is_array()) wrong_type("input", "a string or an array of input items", *in);
  if (in->empty()) bad_value("input", "empty array. Expected at least one item.");
  std::vector<Message> out;
  for (size_t i = 0; i < in->size(); ++i) {
    const json& item = (*in)[i];
    const json* type = item.is_object() ? field(item, "type") : nullptr;
    if (type && *type == "reasoning") continue;
    Message m = parse_item(item, i, unknown);
    // Calls after an assistant message (or each other) belong to that turn.
    if (!m.tool_calls.empty() && !out.empty() && out.back().role == "assistant") {
      for (auto& c : m.tool_calls) out.back().tool_calls.push_back(std::move(c));
      continue;
    }
    out.push_back(std::move(m));
  }
  if (out.empty()) bad_value("input", "no message items. Expected at least one message.");
  return out;
}

// Structured output, background mode and stored conversations are
// known but not supported (their neutral values pass).
void reject_unsupported(const json& body) {
  if (const json* v = field(body, "text")) {
    if (!v->is_object()) wrong_type("text", "an object", *v);
    const json* f = field(*v, "format");
    const json* t = f && f->is_object() ? field(*f, "type") : nullptr;
    if (f && (!t || *t != "text"))
      unsupported("text.format", "only {\"type\": \"text\"} is supported.");
  }
  bool background = false;
  if (get_bool(body, "background", background) && background)
    unsupported("background", "background responses are not supported.");
  if (field(body, "conversation"))
    unsupported("conversation", "conversations are not supported; use previous_response_id.");
  int64_t top_logprobs = 0;
  if (get_int(body, "top_logprobs", top_logprobs) && top_logprobs > 0)
    unsupported("top_logprobs", "log probabilities are not supported.");
}

void parse_sampling(const json& body, ResponsesRequest& r) {
  SamplingParams& p = r.g.params;
  int64_t i = 0;
  if (get_int(body, "max_output_tokens", i)) {
    if (i < 1)
      bad_value("max_output_tokens", std::to_string(i) + " is less than the minimum of 1.");
    p.max_tokens = int(std::min<int64_t>(i, std::numeric_limits<int>::max()));
    r.g.max_tokens_given = true;
    r.echo["max_output_tokens"] = i;
  }
  read_sampling(body, kResponsesSampling, p, &r.echo);
  validate_sampling(p);
}

}  // namespace

ResponsesRequest parse_responses_request(const json& body, const ResponseLookup& lookup,
                                         UnknownFields unknown) {
  check_fields(body, "",
               {"model",
                "input",
                "instructions",
                "max_output_tokens",
                "temperature",
                "top_p",
                "stream",
                "store",
                "previous_response_id",
                "metadata",
                "user",
                "service_tier",
                "parallel_tool_calls",
                "truncation",
                "reasoning",
                "include",
                "tools",
                "tool_choice",
                "text",
                "background",
                "conversation",
                "top_logprobs",
                "prompt_cache_key",
                "safety_identifier",
                "max_tool_calls",
                "stream_options"},
               unknown);
  reject_unsupported(body);
  ResponsesRequest r;
  r.g.kind = GenerationRequest::Kind::Chat;
  r.echo = json{{"instructions", nullptr},
                {"max_output_tokens", nullptr},
                {"temperature", 1.0},
                {"top_p", 1.0},
                {"previous_response_id", nullptr},
                {"store", true},
                {"metadata", json::object()}};
  get_string(body, "model", r.g.model);
  std::string instructions;
  if (get_string(body, "instructions", instructions)) r.echo["instructions"] = instructions;
  if (get_string(body, "previous_response_id", r.previous_response_id)) {
    auto history = lookup(r.previous_response_id);
    if (!history)
      throw ApiError(404, "invalid_request_error",
                     "Previous response with id '" + r.previous_response_id + "' not found.",
                     "previous_response_id", "previous_response_not_found");
    r.conversation = std::move(*history);
    r.echo["previous_response_id"] = r.previous_response_id;
  }
  for (Message& m : parse_input(body, unknown)) r.conversation.push_back(std::move(m));
  get_bool(body, "store", r.store);
  r.echo["store"] = r.store;
  if (const json* v = field(body, "metadata")) {
    if (!v->is_object()) wrong_type("metadata", "an object", *v);
    r.echo["metadata"] = *v;
  }
  get_bool(body, "stream", r.g.stream);
  parse_sampling(body, r);
  parse_responses_tools(body, r.g);
  if (r.g.uses_tools()) {
    r.echo["tools"] = *field(body, "tools");
    r.echo["tool_choice"] = field(body, "tool_choice") ? *field(body, "tool_choice") : json("auto");
    r.echo["parallel_tool_calls"] = r.g.parallel_tool_calls;
  }
  // Instructions apply to this turn only; they are not part of the conversation.
  if (!instructions.empty()) r.g.messages.push_back({"system", instructions});
  r.g.messages.insert(r.g.messages.end(), r.conversation.begin(), r.conversation.end());
  return r;
}

const char* responses_status(const sched::Finish& f) {
  switch (f.reason) {
    case sched::FinishReason::Length:
      return "incomplete";
    case sched::FinishReason::Error:
      return "failed";
    default:
      return "completed";
  }
}

json responses_usage(const sched::Usage& u) {
  return json{{"input_tokens", u.prompt_tokens},
              {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
              {"output_tokens", u.completion_tokens},
              {"output_tokens_details", {{"reasoning_tokens", 0}}},
              {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json responses_message_item(const ResponsesMeta& m, const std::string& text, const char* status) {
  json content = json::array();
  if (std::string_view(status) != "in_progress")
    content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", json::array()}});
  return json{{"type", "message"},
              {"id", m.item_id},
              {"status", status},
              {"role", "assistant"},
              {"content", std::move(content)}};
}

json responses_reasoning_item(const ResponsesMeta& m, const std::string& text, const char* status) {
  json content = json::array();
  if (std::string_view(status) != "in_progress")
    content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return json{{"type", "reasoning"},
              {"id", m.reasoning_id},
              {"status", status},
              {"summary", json::array()},
              {"content", std::move(content)}};
}

json responses_object(const ResponsesMeta& m, const std::string& text, const sched::Finish* f,
                      const std::string& reasoning) {
  json j{{"id", m.id},
         {"object", "response"},
         {"created_at", m.created_at},
         {"status", f ? responses_status(*f) : "in_progress"},
         {"error", nullptr},
         {"incomplete_details", nullptr},
         {"model", m.model},
         {"output", json::array()},
         {"parallel_tool_calls", false},
         {"tool_choice", "none"},
         {"tools", json::array()},
         {"text", {{"format", {{"type", "text"}}}}},
         {"truncation", "disabled"},
         {"usage", nullptr}};
  j.update(m.echo);
  if (!f) return j;
  if (f->reason == sched::FinishReason::Error) {
    j["error"] = {{"code", "server_error"}, {"message", "Generation failed: " + f->error}};
  } else {
    const char* item_status = f->reason == sched::FinishReason::Length ? "incomplete" : "completed";
    j["output"] = json::array();
    if (!reasoning.empty())
      j["output"].push_back(responses_reasoning_item(m, reasoning, item_status));
    j["output"].push_back(responses_message_item(m, text, item_status));
    if (f->reason == sched::FinishReason::Length)
      j["incomplete_details"] = {{"reason", "max_output_tokens"}};
  }
  j["usage"] = responses_usage(f->usage);
  j["timings"] = timings_json(f->timings);
  return j;
}

namespace {

using Kind = AnswerEvent::Kind;

// The event sequence the OpenAI SDK's stream parser expects: response.created,
// response.in_progress, response.output_item.added, response.content_part.added,
// response.output_text.delta per piece, response.output_text.done,
// response.content_part.done, response.output_item.done, then
// response.completed (or response.incomplete / response.failed). A reasoning
// model's thinking comes first as its own item (output_index 0), with
// response.reasoning_text.delta / .done in place of the output_text ones;
// each tool call is an output item after the message. Every event carries a
// sequence_number.
class ResponsesRenderer final : public EventRenderer {
 public:
  explicit ResponsesRenderer(ResponsesRendering r) : r_(std::move(r)) {}

  std::string open() override {
    const json in_progress = responses_object(r_.meta, "", nullptr);
    // One statement per event: sequence numbers follow the order of the calls.
    std::string out = event("response.created", {{"response", in_progress}});
    out += event("response.in_progress", {{"response", in_progress}});
    if (r_.items_on_demand) return out;
    return out + open_message();
  }

  json body(std::span<const ChoiceOutput> c) override {
    const Answer& a = c[0].answer;
    const sched::Finish& f = c[0].finish;
    text_ = a.content;
    reasoning_ = a.reasoning;
    for (const ParsedToolCall& call : a.calls)
      calls_.push_back({call_id(calls_.size()), call.name, call.arguments});
    json done = responses_object(r_.meta, text_, &f, reasoning_);
    add_calls(done, f);
    // A reply that only calls has no message item.
    if (text_.empty() && !calls_.empty() && f.reason != sched::FinishReason::Error)
      done["output"].erase(size_t(message_index()));
    remember(f, done);
    return done;
  }

 private:
  std::string render_event(const AnswerEvent& e) override {
    switch (e.kind) {
      case Kind::Reasoning:
        return reasoning_delta(e.text);
      case Kind::Content: {
        // One statement per event: sequence numbers follow the order of the calls.
        std::string out = answer_started();
        return out += text_delta(e.text);
      }
      case Kind::Call: {
        std::string out = answer_started();
        return out += call_item(e.name, e.text);
      }
      case Kind::CallStart:
      case Kind::CallArguments:
        return {};
      case Kind::End:
        return end(e.finish);
    }
    return {};
  }

  std::string end(const sched::Finish& f) {
    json done = responses_object(r_.meta, text_, &f, reasoning_);
    add_calls(done, f);
    remember(f, done);
    if (f.reason == sched::FinishReason::Error)
      return event("response.failed", {{"response", done}});
    std::string out =
        close_reasoning(f.reason == sched::FinishReason::Length ? "incomplete" : "completed");
    if (!message_open_) out += open_message();
    json text_done = where();
    text_done["text"] = text_;
    text_done["logprobs"] = json::array();
    out += event("response.output_text.done", std::move(text_done));
    out += event("response.content_part.done", part_fields(text_));
    out += event("response.output_item.done",
                 {{"output_index", message_index()}, {"item", done["output"][message_index()]}});
    out += event(std::string("response.") + responses_status(f), {{"response", done}});
    return out;
  }

  // The message item follows a reasoning item when the answer had one.
  int message_index() const { return reasoning_.empty() ? 0 : 1; }

  json where() const {
    return {{"item_id", r_.meta.item_id}, {"output_index", message_index()}, {"content_index", 0}};
  }
  json reasoning_where() const {
    return {{"item_id", r_.meta.reasoning_id}, {"output_index", 0}, {"content_index", 0}};
  }
  json part_fields(const std::string& text) const {
    json e = where();
    e["part"] = {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
    return e;
  }
  std::string event(const std::string& type, json fields) {
    fields["type"] = type;
    fields["sequence_number"] = sequence_++;
    return sse_event(type, fields);
  }

  std::string open_message() {
    message_open_ = true;
    std::string out = event("response.output_item.added",
                            {{"output_index", message_index()},
                             {"item", responses_message_item(r_.meta, "", "in_progress")}});
    return out + event("response.content_part.added", part_fields(""));
  }

  // The answer (text or a call) has begun: the reasoning item is done and
  // the message item is open.
  std::string answer_started() {
    std::string out = close_reasoning("completed");
    if (!message_open_) out += open_message();
    return out;
  }

  std::string text_delta(const std::string& text) {
    text_ += text;
    json e = where();
    e["delta"] = text;
    e["logprobs"] = json::array();
    return event("response.output_text.delta", std::move(e));
  }

  std::string reasoning_delta(const std::string& text) {
    std::string out;
    if (!reasoning_open_) {  // the decoder gives all reasoning before any answer
      reasoning_open_ = true;
      out += event(
          "response.output_item.added",
          {{"output_index", 0}, {"item", responses_reasoning_item(r_.meta, "", "in_progress")}});
      json added = reasoning_where();
      added["part"] = {{"type", "reasoning_text"}, {"text", ""}};
      out += event("response.content_part.added", std::move(added));
    }
    reasoning_ += text;
    json e = reasoning_where();
    e["delta"] = text;
    return out + event("response.reasoning_text.delta", std::move(e));
  }

  std::string close_reasoning(const char* status) {
    if (!reasoning_open_) return {};
    reasoning_open_ = false;
    json done = reasoning_where();
    done["text"] = reasoning_;
    std::string out = event("response.reasoning_text.done", done);
    done.erase("text");
    done["part"] = {{"type", "reasoning_text"}, {"text", reasoning_}};
    out += event("response.content_part.done", std::move(done));
    out += event(
        "response.output_item.done",
        {{"output_index", 0}, {"item", responses_reasoning_item(r_.meta, reasoning_, status)}});
    return out;
  }

  // A call is its own output item after the message: added, its arguments
  // (one delta), done.
  std::string call_item(const std::string& name, const std::string& arguments) {
    calls_.push_back({call_id(calls_.size()), name, arguments});
    const int index = message_index() + int(calls_.size());
    const std::string item_id = "fc" + calls_.back().id.substr(4);
    json item = function_call_item(calls_.back(), "in_progress");
    item["arguments"] = "";
    std::string out =
        event("response.output_item.added", {{"output_index", index}, {"item", item}});
    out += event("response.function_call_arguments.delta",
                 {{"item_id", item_id}, {"output_index", index}, {"delta", arguments}});
    out += event("response.function_call_arguments.done",
                 {{"item_id", item_id}, {"output_index", index}, {"arguments", arguments}});
    out +=
        event("response.output_item.done",
              {{"output_index", index}, {"item", function_call_item(calls_.back(), "completed")}});
    return out;
  }

  std::string call_id(size_t index) const {
    return "call_" + r_.meta.id.substr(5) + "_" + std::to_string(index);
  }

  static json function_call_item(const ToolCallOut& c, const char* status) {
    return json{{"type", "function_call"}, {"id", "fc" + c.id.substr(4)}, {"call_id", c.id},
                {"name", c.name},          {"arguments", c.arguments},    {"status", status}};
  }

  void add_calls(json& done, const sched::Finish& f) const {
    if (f.reason == sched::FinishReason::Error) return;
    for (const ToolCallOut& c : calls_)
      done["output"].push_back(function_call_item(c, "completed"));
  }

  void remember(const sched::Finish& f, const json& response) {
    if (r_.remember && f.reason != sched::FinishReason::Error) r_.remember(text_, calls_, response);
  }

  ResponsesRendering r_;
  std::string text_;       // the answer so far
  std::string reasoning_;  // a reasoning model's thinking so far
  std::vector<ToolCallOut> calls_;
  bool reasoning_open_ = false;
  bool message_open_ = false;
  int sequence_ = 0;
};

class ResponsesExchange final : public ApiExchange {
 public:
  // A stored response is read, continued and deleted by its id alone, so the
  // id is 128 random bits, never the request counter (which anyone could
  // enumerate); the log line ties it to the request id.
  ResponsesExchange(ServerContext& ctx, const std::string& rid) : ctx_(ctx) {
    const std::string token = random_hex(16);
    meta_.id = "resp_" + token;
    meta_.item_id = "msg_" + token;
    meta_.reasoning_id = "rs_" + token;
    ctx_.log->debug("[{}] response id {}", rid, meta_.id);
  }

  GenerationRequest parse(const json& body) override {
    // A stored conversation keeps its pictures' sources: decoded again here.
    auto lookup = [this](const std::string& id) {
      auto history = ctx_.responses.get(id);
      if (history)
        for (Message& m : *history) {
          if (m.images.empty())
            for (const ImageSource& src : m.image_sources)
              m.images.push_back(ctx_.media.reload(*src.url, src.hash, "previous_response_id"));
          if (m.audio.empty())
            for (const ImageSource& src : m.audio_sources)
              m.audio.push_back(
                  ctx_.media.reload_audio(*src.url, src.hash, "previous_response_id"));
        }
      return history;
    };
    ImageList images;
    AudioList audio;
    std::vector<ImageSource> sources, audio_sources;
    const json marked =
        responses_with_media_markers(ctx_.media, body, images, &sources, audio, &audio_sources);
    req_ = parse_responses_request(marked, lookup, ctx_.unknown_fields());
    // The conversation keeps its media, so a continuation shows them again.
    attach_images(req_.conversation, std::move(images), std::move(sources));
    attach_audio(req_.conversation, std::move(audio), std::move(audio_sources));
    req_.g.images.clear();
    req_.g.audio.clear();
    for (const Message& m : req_.conversation) {
      req_.g.images.insert(req_.g.images.end(), m.images.begin(), m.images.end());
      req_.g.audio.insert(req_.g.audio.end(), m.audio.begin(), m.audio.end());
    }
    meta_.echo = req_.echo;
    return req_.g;
  }

  AnswerOptions answer_options(const Submission& s, bool) override {
    return chat_answer(ctx_, s, req_.g.uses_tools());
  }

  std::unique_ptr<AnswerRenderer> renderer(const Submission& s) override {
    ResponsesMeta m = meta_;
    m.created_at = s.meta.created;
    m.model = ctx_.model_id;
    auto remember = [this](const std::string& text, std::span<const ToolCallOut> calls,
                           const json& response) { store(text, calls, response); };
    return make_responses_renderer(
        {.meta = std::move(m), .items_on_demand = s.split_reasoning, .remember = remember});
  }

 private:
  // A finished response joins the store (unless store: false) so a later
  // request can continue it; its prompt is then a prefix-cache hit. The
  // history keeps the answer only: chat templates drop earlier thinking.
  // Its pictures are kept as sources, never as decoded pixels.
  void store(const std::string& text, std::span<const ToolCallOut> calls, const json& response) {
    if (!req_.store) return;
    std::vector<Message> history = req_.conversation;
    for (Message& m : history) {
      m.images.clear();
      m.audio.clear();
    }
    history.push_back({"assistant", text});
    for (const ToolCallOut& c : calls)
      history.back().tool_calls.push_back({c.id, c.name, c.arguments});
    ctx_.responses.put(meta_.id, std::move(history), response);
  }

  ServerContext& ctx_;
  ResponsesRequest req_;
  ResponsesMeta meta_;
};

}  // namespace

std::unique_ptr<AnswerRenderer> make_responses_renderer(ResponsesRendering r) {
  return std::make_unique<ResponsesRenderer>(std::move(r));
}

std::unique_ptr<ApiExchange> make_responses_exchange(ServerContext& ctx, const std::string& rid) {
  return std::make_unique<ResponsesExchange>(ctx, rid);
}

}  // namespace tern::server
