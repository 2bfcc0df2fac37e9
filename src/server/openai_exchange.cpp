// OpenAI chat completions and completions as an ApiExchange: parsing in
// openai_request.cpp, the bodies and chunks in openai_response.cpp (several
// choices and log probabilities in openai_choices.cpp). A reasoning model's
// thinking is split out for single-choice requests without logprobs.
#include <optional>

#include "api_exchange.h"
#include "tern/engine/engine.h"
#include "tern/sampling/reasoning_split.h"
#include "tern/sampling/tool_calls.h"
#include "tern/server/openai_choices.h"
#include "tern/server/openai_response.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::server {
namespace {

using json = nlohmann::json;

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

  std::string start(const Submission& s) override {
    meta_ = s.meta;
    if (s.split_reasoning && !choices()) {
      split_.emplace(s.in_reasoning);
      in_reasoning_ = s.in_reasoning;
    }
    offsets_.assign(size_t(n_), s.echo.size());
    if (tools_) parser_.emplace(tool_syntax(ctx_), /*stream_arguments=*/true);
    if (meta_.kind != GenerationRequest::Kind::Chat) return "";
    if (!choices()) return sse_event(chunk_role(meta_, usage_));
    std::string out;
    for (int i = 0; i < n_; ++i) out += sse_event(choice_role_chunk(meta_, i, usage_));
    return out;
  }

  std::string stream_choice(size_t index, const sched::StreamChunk& c) override {
    if (!choices()) return ApiExchange::stream_choice(index, c);
    std::string out;
    if (!c.text.empty() || !c.logprobs.empty())
      out += sse_event(
          choice_text_chunk(meta_, int(index), c.text, logprobs_json(index, c.logprobs), usage_));
    if (c.finish && c.finish->reason != sched::FinishReason::Error)
      out += sse_event(choice_finish_chunk(meta_, int(index), *c.finish, usage_));
    return out;
  }

  std::string stream_done(const std::vector<sched::Finish>& f) override {
    if (!choices()) return ApiExchange::stream_done(f);
    std::string out;
    if (usage_) out += sse_event(choices_usage_chunk(meta_, f));
    return out += kSseDone;
  }

  json body_choices(const std::vector<ChoiceOutput>& c) override {
    if (!choices()) return ApiExchange::body_choices(c);
    std::vector<ChoiceResult> r;
    for (size_t i = 0; i < c.size(); ++i)
      r.push_back({c[i].text, logprobs_json(i, c[i].logprobs), c[i].finish});
    return choices_body(meta_, r);
  }

  std::string stream_text(const std::string& text) override {
    if (!split_) return stream_content(text);
    return stream_parts(split_->push(text));
  }

  std::string stream_end(const sched::Finish& f) override {
    std::string out;
    if (split_) out += stream_parts(split_->flush());
    if (parser_) out += stream_calls(parser_->flush());
    if (f.reason == sched::FinishReason::Error) {
      out += sse_event(error_body(ApiError(500, "server_error", "Generation failed: " + f.error)));
    } else {
      json fin = chunk_finish(meta_, f, usage_);
      if (called(f)) fin["choices"][0]["finish_reason"] = "tool_calls";
      out += sse_event(fin);
      if (usage_) out += sse_event(chunk_usage(meta_, f));
    }
    return out += kSseDone;
  }

  json body(const std::string& text, const sched::Finish& f) override {
    if (!split_) return with_tool_calls(completion_body(meta_, text, f), text, f);
    const auto parts = ReasoningSplitter::split(text, in_reasoning_);
    json j = with_tool_calls(completion_body(meta_, parts.content, f), parts.content, f);
    if (!parts.reasoning.empty()) j["choices"][0]["message"]["reasoning_content"] = parts.reasoning;
    return j;
  }

 private:
  // Reasoning streams as delta.reasoning_content, the answer as delta.content.
  std::string stream_parts(const ReasoningSplitter::Parts& p) {
    std::string out;
    if (!p.reasoning.empty()) {
      json j = chunk_text(meta_, "", usage_);
      j["choices"][0]["delta"] = json{{"reasoning_content", p.reasoning}};
      out += sse_event(j);
    }
    if (!p.content.empty()) out += stream_content(p.content);
    return out;
  }

  // Answer text: as is, or split into content and tool calls.
  std::string stream_content(const std::string& text) {
    if (!parser_) return sse_event(chunk_text(meta_, text, usage_));
    return stream_calls(parser_->push(text));
  }

  std::string stream_calls(const ToolCallParser::Parts& p) {
    std::string out;
    if (!p.content.empty()) out += sse_event(chunk_text(meta_, p.content, usage_));
    // A call's name as soon as it is known, then its arguments as they are written.
    for (const ToolCallParser::CallDelta& d : p.deltas) {
      const int index = int(d.index);
      if (!d.name.empty()) {
        calls_.push_back({call_id(index), d.name, ""});
        out += sse_event(chunk_tool_call_head(meta_, index, calls_.back(), usage_));
      }
      if (!d.arguments.empty())
        out += sse_event(chunk_tool_call_args(meta_, index, d.arguments, usage_));
    }
    return out;
  }

  // The reply made calls (and was not cut off by max_tokens).
  bool called(const sched::Finish& f) const {
    return !calls_.empty() && f.reason != sched::FinishReason::Length;
  }

  // Not streaming: the answer split into content and message.tool_calls.
  json with_tool_calls(json j, const std::string& content, const sched::Finish& f) {
    if (!tools_) return j;
    ToolCallParser parser(tool_syntax(ctx_));
    ToolCallParser::Parts a = parser.push(content);
    ToolCallParser::Parts b = parser.flush();
    a.content += b.content;
    for (auto& c : b.calls) a.calls.push_back(std::move(c));
    for (size_t i = 0; i < a.calls.size(); ++i)
      calls_.push_back({call_id(int(i)), a.calls[i].name, a.calls[i].arguments});
    json& choice = j["choices"][0];
    choice["message"]["content"] = a.content.empty() && !calls_.empty() ? json() : json(a.content);
    if (!calls_.empty()) choice["message"]["tool_calls"] = tool_calls_json(calls_);
    if (called(f)) choice["finish_reason"] = "tool_calls";
    return j;
  }

  std::string call_id(int index) const {
    return "call_" + meta_.id.substr(meta_.id.find('-') + 1) + "_" + std::to_string(index);
  }

  // Several choices or log probabilities: rendered by openai_choices.cpp.
  bool choices() const { return n_ > 1 || logprobs_; }

  // The request's logprobs shape for tokens of choice `index`, or null.
  json logprobs_json(size_t index, std::span<const TokenLogprob> lps) {
    if (!logprobs_) return nullptr;
    const Tokenizer& tok = ctx_.engine.tokenizer();
    const TokenText text = [&](int32_t id) {
      return tok.token_to_piece(id, /*render_special=*/true);
    };
    if (meta_.kind == GenerationRequest::Kind::Chat) return chat_logprobs(lps, text);
    return completion_logprobs(lps, text, offsets_[index]);
  }

  ServerContext& ctx_;
  GenerationRequest::Kind kind_;
  bool usage_ = false;  // stream_options.include_usage
  ResponseMeta meta_;
  std::optional<ReasoningSplitter> split_;  // chat with --reasoning-format splitting
  bool in_reasoning_ = false;
  int n_ = 1;
  bool logprobs_ = false;
  bool tools_ = false;                    // tool calls are parsed from the answer
  std::optional<ToolCallParser> parser_;  // streaming with tools
  std::vector<ToolCallOut> calls_;        // the calls so far
  std::vector<size_t> offsets_;           // completions: text_offset of each choice's next token
};

}  // namespace

std::unique_ptr<ApiExchange> make_openai_exchange(ServerContext& ctx,
                                                  GenerationRequest::Kind kind) {
  return std::make_unique<OpenAiExchange>(ctx, kind);
}

}  // namespace tern::server
