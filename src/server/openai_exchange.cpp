// OpenAI chat completions and completions as an ApiExchange: parsing in
// openai_request.cpp, the bodies and chunks in openai_bodies.cpp (several
// choices and log probabilities in openai_choices.cpp). A reasoning model's
// thinking is split out for single-choice requests without logprobs.
#include "renderers.h"
#include "tern/engine/engine.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using Kind = AnswerEvent::Kind;

class OpenAiRenderer final : public AnswerRenderer {
 public:
  explicit OpenAiRenderer(OpenAiRendering r)
      : r_(std::move(r)), offsets_(size_t(r_.n), r_.echo_bytes) {}

  std::string open() override {
    if (r_.meta.kind != GenerationRequest::Kind::Chat) return "";
    if (!choices()) return sse_event(chunk_role(r_.meta, r_.include_usage));
    std::string out;
    for (int i = 0; i < r_.n; ++i)
      out += sse_event(choice_role_chunk(r_.meta, i, r_.include_usage));
    return out;
  }

  std::string render(size_t index, const sched::StreamChunk& c,
                     std::span<const AnswerEvent> events) override {
    if (choices()) return render_choice(index, c);
    std::string out;
    for (const AnswerEvent& e : events) out += render_event(e);
    return out;
  }

  std::string close(std::span<const sched::Finish> f) override {
    std::string out;
    if (choices()) {
      // The first error as the stream's error, else the usage of every choice.
      for (const sched::Finish& x : f)
        if (x.reason == sched::FinishReason::Error) return error_event(x) + std::string(kSseDone);
      if (r_.include_usage) out += sse_event(choices_usage_chunk(r_.meta, f));
    }
    return out += kSseDone;
  }

  json body(std::span<const ChoiceOutput> c) override {
    if (choices()) {
      std::vector<ChoiceResult> r;
      for (size_t i = 0; i < c.size(); ++i)
        r.push_back({c[i].text, logprobs_json(i, c[i].logprobs), c[i].finish});
      return choices_body(r_.meta, r);
    }
    const Answer& a = c[0].answer;
    const sched::Finish& f = c[0].finish;
    json j = completion_body(r_.meta, a.content, f);
    if (!a.calls.empty()) {
      std::vector<ToolCallOut> calls;
      for (size_t i = 0; i < a.calls.size(); ++i)
        calls.push_back({call_id(i), a.calls[i].name, a.calls[i].arguments});
      json& choice = j["choices"][0];
      if (a.content.empty()) choice["message"]["content"] = nullptr;
      choice["message"]["tool_calls"] = tool_calls_json(calls);
      if (called(calls.size(), f)) choice["finish_reason"] = "tool_calls";
    }
    if (!a.reasoning.empty()) j["choices"][0]["message"]["reasoning_content"] = a.reasoning;
    return j;
  }

 private:
  std::string render_event(const AnswerEvent& e) {
    const bool u = r_.include_usage;
    switch (e.kind) {
      case Kind::Reasoning: {
        json j = chunk_text(r_.meta, "", u);
        j["choices"][0]["delta"] = json{{"reasoning_content", e.text}};
        return sse_event(j);
      }
      case Kind::Content:
        return sse_event(chunk_text(r_.meta, e.text, u));
      case Kind::CallStart:  // a call's name as soon as it is known
        return sse_event(
            chunk_tool_call_head(r_.meta, int(e.call), {call_id(e.call), e.name, ""}, u));
      case Kind::CallArguments:  // then its arguments as they are written
        return sse_event(chunk_tool_call_args(r_.meta, int(e.call), e.text, u));
      case Kind::Call:  // already out, piece by piece
        return {};
      case Kind::End:
        break;
    }
    if (e.finish.reason == sched::FinishReason::Error) return error_event(e.finish);
    json fin = chunk_finish(r_.meta, e.finish, u);
    if (called(e.calls, e.finish)) fin["choices"][0]["finish_reason"] = "tool_calls";
    std::string out = sse_event(fin);
    if (u) out += sse_event(chunk_usage(r_.meta, e.finish));
    return out;
  }

  std::string render_choice(size_t index, const sched::StreamChunk& c) {
    std::string out;
    if (!c.text.empty() || !c.logprobs.empty())
      out += sse_event(choice_text_chunk(r_.meta, int(index), c.text,
                                         logprobs_json(index, c.logprobs), r_.include_usage));
    if (c.finish && c.finish->reason != sched::FinishReason::Error)
      out += sse_event(choice_finish_chunk(r_.meta, int(index), *c.finish, r_.include_usage));
    return out;
  }

  static std::string error_event(const sched::Finish& f) {
    return sse_event(error_body(ApiError(500, "server_error", "Generation failed: " + f.error)));
  }

  // The reply made calls (and was not cut off by max_tokens).
  static bool called(size_t calls, const sched::Finish& f) {
    return calls > 0 && f.reason != sched::FinishReason::Length;
  }

  std::string call_id(size_t index) const {
    return "call_" + r_.meta.id.substr(r_.meta.id.find('-') + 1) + "_" + std::to_string(index);
  }

  // Several choices or log probabilities: rendered by openai_choices.cpp.
  bool choices() const { return r_.n > 1 || r_.logprobs; }

  // The request's logprobs shape for tokens of choice `index`, or null.
  json logprobs_json(size_t index, std::span<const TokenLogprob> lps) {
    if (!r_.logprobs) return nullptr;
    if (r_.meta.kind == GenerationRequest::Kind::Chat) return chat_logprobs(lps, r_.token_text);
    return completion_logprobs(lps, r_.token_text, offsets_[index]);
  }

  OpenAiRendering r_;
  std::vector<size_t> offsets_;  // completions: text_offset of each choice's next token
};

class OpenAiExchange final : public ApiExchange {
 public:
  OpenAiExchange(ServerContext& ctx, GenerationRequest::Kind kind) : ctx_(ctx), kind_(kind) {}

  GenerationRequest parse(const json& body) override {
    GenerationRequest g = kind_ == GenerationRequest::Kind::Chat
                              ? parse_chat_with_media(ctx_.media, body, {}, ctx_.unknown_fields())
                              : parse_completion_request(body, {}, ctx_.unknown_fields());
    usage_ = g.include_usage;
    n_ = g.n;
    logprobs_ = g.params.logprobs >= 0;
    tools_ = g.uses_tools();
    return g;
  }

  AnswerOptions answer_options(const Submission& s, bool streaming) override {
    if (n_ > 1 || logprobs_) return {};  // each choice's text as generated
    return chat_answer(ctx_, s, tools_, streaming);
  }

  std::unique_ptr<AnswerRenderer> renderer(const Submission& s) override {
    const Tokenizer& tok = ctx_.engine.tokenizer();
    return make_openai_renderer(
        {.meta = s.meta,
         .include_usage = usage_,
         .n = n_,
         .logprobs = logprobs_,
         .token_text =
             [&tok](int32_t id) { return tok.token_to_piece(id, /*render_special=*/true); },
         .echo_bytes = s.echo.size()});
  }

 private:
  ServerContext& ctx_;
  GenerationRequest::Kind kind_;
  bool usage_ = false;  // stream_options.include_usage
  int n_ = 1;
  bool logprobs_ = false;
  bool tools_ = false;  // tool calls are parsed from the answer
};

}  // namespace

std::unique_ptr<AnswerRenderer> make_openai_renderer(OpenAiRendering r) {
  return std::make_unique<OpenAiRenderer>(std::move(r));
}

std::unique_ptr<ApiExchange> make_openai_exchange(ServerContext& ctx,
                                                  GenerationRequest::Kind kind) {
  return std::make_unique<OpenAiExchange>(ctx, kind);
}

}  // namespace tern::server
