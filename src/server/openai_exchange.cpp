// OpenAI chat completions and completions as an ApiExchange: parsing in
// openai_request.cpp, the bodies and chunks in openai_response.cpp.
#include <optional>

#include "api_exchange.h"
#include "tern/sampling/reasoning_split.h"
#include "tern/server/openai_response.h"

namespace tern::server {
namespace {

using json = nlohmann::json;

class OpenAiExchange final : public ApiExchange {
 public:
  OpenAiExchange(ServerContext& ctx, GenerationRequest::Kind kind) : ctx_(ctx), kind_(kind) {}

  GenerationRequest parse(const json& body) override {
    GenerationRequest g = kind_ == GenerationRequest::Kind::Chat
                              ? parse_chat_request(body, {}, ctx_.unknown_fields())
                              : parse_completion_request(body, {}, ctx_.unknown_fields());
    usage_ = g.include_usage;
    return g;
  }

  std::string start(const Submission& s) override {
    meta_ = s.meta;
    if (s.split_reasoning) {
      split_.emplace(s.in_reasoning);
      in_reasoning_ = s.in_reasoning;
    }
    return meta_.kind == GenerationRequest::Kind::Chat ? sse_event(chunk_role(meta_, usage_)) : "";
  }

  std::string stream_text(const std::string& text) override {
    if (!split_) return sse_event(chunk_text(meta_, text, usage_));
    return stream_parts(split_->push(text));
  }

  std::string stream_end(const sched::Finish& f) override {
    std::string out;
    if (split_) out += stream_parts(split_->flush());
    if (f.reason == sched::FinishReason::Error) {
      out += sse_event(error_body(ApiError(500, "server_error", "Generation failed: " + f.error)));
    } else {
      out += sse_event(chunk_finish(meta_, f, usage_));
      if (usage_) out += sse_event(chunk_usage(meta_, f));
    }
    return out += kSseDone;
  }

  json body(const std::string& text, const sched::Finish& f) override {
    if (!split_) return completion_body(meta_, text, f);
    const auto parts = ReasoningSplitter::split(text, in_reasoning_);
    json j = completion_body(meta_, parts.content, f);
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
    if (!p.content.empty()) out += sse_event(chunk_text(meta_, p.content, usage_));
    return out;
  }

  ServerContext& ctx_;
  GenerationRequest::Kind kind_;
  bool usage_ = false;  // stream_options.include_usage
  ResponseMeta meta_;
  std::optional<ReasoningSplitter> split_;  // chat with --reasoning-format splitting
  bool in_reasoning_ = false;
};

}  // namespace

std::unique_ptr<ApiExchange> make_openai_exchange(ServerContext& ctx,
                                                  GenerationRequest::Kind kind) {
  return std::make_unique<OpenAiExchange>(ctx, kind);
}

}  // namespace tern::server
