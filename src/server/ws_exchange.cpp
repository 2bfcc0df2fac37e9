// The WebSocket protocol (web/PROTOCOL.md) as an ApiExchange: a `generate`
// message parses as a chat or completion request, a `responses` message as
// the Responses API's; the answer renders as start, delta, tool_call and done
// messages, one JSON document per line (the session sends each as a frame).
#include "renderers.h"
#include "tern/server/openai_choices.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using Kind = AnswerEvent::Kind;

class WsRenderer final : public AnswerRenderer {
 public:
  explicit WsRenderer(WsRendering r) : r_(std::move(r)) {}

  std::string open() override {
    return line({{"type", "start"},
                 {"id", r_.id},
                 {"request_id", r_.request_id},
                 {"model", r_.model},
                 {"prompt_tokens", r_.prompt_tokens}});
  }

  // One delta per drain (text, reasoning beside it, the tokens it took),
  // then a tool_call message per call that ended in it, then done.
  std::string render(size_t, const sched::StreamChunk& c,
                     std::span<const AnswerEvent> events) override {
    if (r_.response) text_ += c.text;
    std::string content, reasoning, calls, out;
    const AnswerEvent* end = nullptr;
    for (const AnswerEvent& e : events) {
      if (e.kind == Kind::Content) content += e.text;
      if (e.kind == Kind::Reasoning) reasoning += e.text;
      if (e.kind == Kind::Call)
        calls += line({{"type", "tool_call"},
                       {"id", r_.id},
                       {"index", e.call},
                       {"call_id", "call_" + r_.request_id + "_" + std::to_string(e.call)},
                       {"name", e.name},
                       {"arguments", e.text}});
      if (e.kind == Kind::End) end = &e;
    }
    if (!content.empty() || !reasoning.empty() || c.n_tokens > 0) {
      json d{{"type", "delta"}, {"id", r_.id}, {"text", content}, {"tokens", c.n_tokens}};
      if (!reasoning.empty()) d["reasoning"] = reasoning;
      out += line(d);
    }
    out += calls;
    if (end) out += done(*end);
    return out;
  }

  json body(std::span<const ChoiceOutput>) override {
    throw std::logic_error("the WebSocket protocol always streams");
  }

 private:
  std::string done(const AnswerEvent& e) {
    const sched::Finish& f = e.finish;
    const bool called = e.calls > 0 && f.reason == sched::FinishReason::Stop;
    json d = {{"type", "done"},
              {"id", r_.id},
              {"finish_reason", called ? "tool_calls" : sched::to_string(f.reason)},
              {"usage", usage_json(f.usage)},
              {"timings", timings_json(f.timings)}};
    if (!f.error.empty()) d["error"] = f.error;
    if (r_.response && f.reason != sched::FinishReason::Error) {
      std::vector<ChoiceOutput> whole(1);
      whole[0] = {text_, {}, f, decode_answer(text_, r_.response_options)};
      d["response"] = r_.response->body(whole);
    }
    return line(d);
  }

  static std::string line(const json& j) { return dump(j) + "\n"; }

  WsRendering r_;
  std::string text_;  // a `responses` message: the whole output, for the final object
};

constexpr const char* kOwnFields[] = {"type", "id"};

class WsExchange final : public ApiExchange {
 public:
  WsExchange(ServerContext& ctx, std::string id, std::string request_id, bool responses)
      : ctx_(ctx), id_(std::move(id)), request_id_(std::move(request_id)) {
    if (responses) responses_ = make_responses_exchange(ctx, request_id_);
  }

  GenerationRequest parse(const json& msg) override {
    const std::vector<std::string> own(std::begin(kOwnFields), std::end(kOwnFields));
    GenerationRequest g;
    if (responses_) {
      json body = msg;
      for (const auto& k : own) body.erase(k);
      g = responses_->parse(body);
    } else {
      g = msg.contains("prompt")
              ? parse_completion_request(msg, own, ctx_.unknown_fields())
              : parse_chat_with_media(ctx_.media, msg, own, ctx_.unknown_fields());
      tools_ = g.uses_tools();
    }
    // One stream of deltas per message: several choices or log probabilities
    // are the HTTP API's (PROTOCOL.md).
    if (g.n != 1)
      throw ApiError::bad_request(
          "Unsupported value: 'n': the WebSocket generates one choice; "
          "send n separate generate messages.",
          "n", "unsupported_value");
    if (g.params.logprobs >= 0)
      throw ApiError::bad_request(
          "Unsupported parameter: 'logprobs' is not available over the WebSocket; use the HTTP "
          "API.",
          "logprobs", "unsupported_parameter");
    return g;
  }

  // A `responses` message's deltas carry its text and reasoning; its calls
  // are in the final response object.
  AnswerOptions answer_options(const Submission& s, bool) override {
    return chat_answer(ctx_, s, tools_);
  }

  std::unique_ptr<AnswerRenderer> renderer(const Submission& s) override {
    WsRendering r;
    r.id = id_;
    r.request_id = request_id_;
    r.model = ctx_.model_id;
    r.prompt_tokens = s.prompt_tokens;
    if (responses_) {
      r.response = responses_->renderer(s);
      r.response_options = responses_->answer_options(s, false);
    }
    return make_ws_renderer(std::move(r));
  }

 private:
  ServerContext& ctx_;
  std::string id_, request_id_;
  std::unique_ptr<ApiExchange> responses_;  // a `responses` message: that API parses
  bool tools_ = false;
};

}  // namespace

std::unique_ptr<AnswerRenderer> make_ws_renderer(WsRendering r) {
  return std::make_unique<WsRenderer>(std::move(r));
}

std::unique_ptr<ApiExchange> make_ws_exchange(ServerContext& ctx, const std::string& id,
                                              const std::string& request_id, bool responses) {
  return std::make_unique<WsExchange>(ctx, id, request_id, responses);
}

}  // namespace tern::server
