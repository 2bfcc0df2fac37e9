#include "generation.h"

#include <chrono>
#include <vector>

#include "tern/engine/engine.h"
#include "tern/sched/scheduler.h"
#include "tern/tokenizer/chat_template.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::server {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string response_id(GenerationRequest::Kind kind, const std::string& rid) {
  return (kind == GenerationRequest::Kind::Chat ? "chatcmpl-" : "cmpl-") + rid;
}

namespace {

std::vector<int32_t> prompt_tokens(ServerContext& ctx, const GenerationRequest& g) {
  const Tokenizer& tok = ctx.engine.tokenizer();
  if (g.kind == GenerationRequest::Kind::Completion) {
    if (!g.prompt_tokens.empty()) {
      for (int32_t t : g.prompt_tokens)
        if (t >= ctx.engine.n_vocab())
          throw ApiError::bad_request("Invalid value for 'prompt': token id " + std::to_string(t) +
                                          " is outside the vocabulary.",
                                      "prompt", "invalid_value");
      return g.prompt_tokens;
    }
    return tok.encode(g.prompt, /*add_bos=*/true, /*parse_special=*/true);
  }
  std::vector<ChatMessage> msgs;
  msgs.reserve(g.messages.size());
  for (const auto& m : g.messages) msgs.push_back({m.role, m.content});
  try {
    // Message content is tokenized literally: only the template's markers are control tokens.
    return encode_chat(tok, ctx.engine.chat_template(), msgs, /*add_generation_prompt=*/true);
  } catch (const InvalidArgument& e) {
    throw ApiError::bad_request(std::string("Invalid 'messages': ") + e.what(), "messages",
                                "invalid_value");
  }
}

}  // namespace

Submission submit_generation(ServerContext& ctx, const GenerationRequest& g, const std::string& rid,
                             sched::Stream::Notify notify) {
  std::vector<int32_t> ids = prompt_tokens(ctx, g);
  const int n_ctx = ctx.scheduler.n_ctx();
  if (ids.empty())
    throw ApiError::bad_request("The prompt is empty after tokenization.", "prompt",
                                "invalid_value");
  if (int(ids.size()) >= n_ctx) {
    const bool chat = g.kind == GenerationRequest::Kind::Chat;
    throw ApiError::bad_request("This model's maximum context length is " + std::to_string(n_ctx) +
                                    " tokens. However, your " + (chat ? "messages" : "prompt") +
                                    " resulted in " + std::to_string(ids.size()) +
                                    " tokens. Please reduce the length of the " +
                                    (chat ? "messages." : "prompt."),
                                chat ? "messages" : "prompt", "context_length_exceeded");
  }
  Submission s;
  s.prompt_tokens = int(ids.size());
  s.meta = ResponseMeta{response_id(g.kind, rid), unix_now(), ctx.model_id, g.kind};
  if (g.echo) s.echo = g.prompt;
  s.stream = std::make_shared<sched::Stream>(std::move(notify));

  sched::Request r;
  r.id = rid;
  r.prompt = std::move(ids);
  r.params = g.params;
  r.stream = s.stream;
  switch (ctx.scheduler.submit(std::move(r))) {
    case sched::SubmitStatus::Accepted:
      break;
    case sched::SubmitStatus::QueueFull:
      throw ApiError(429, "rate_limit_exceeded",
                     "The server is overloaded: too many requests are waiting. Retry later.", {},
                     "queue_full");
    case sched::SubmitStatus::ShuttingDown:
      throw ApiError(503, "server_error", "The server is shutting down.", {}, "shutting_down");
  }
  ctx.log->debug("[{}] submitted: {} prompt tokens, max_tokens={}", rid, s.prompt_tokens,
                 g.params.max_tokens);
  return s;
}

}  // namespace tern::server
