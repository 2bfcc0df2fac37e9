#include "generation.h"

#include <chrono>
#include <vector>

#include "json_fields.h"
#include "tern/engine/engine.h"
#include "tern/engine/media_side.h"
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

// The prompt's token ids; with images (--mmproj), also their spans.
std::vector<int32_t> prompt_tokens(ServerContext& ctx, const GenerationRequest& g,
                                   std::vector<vision::MediaSpan>& media) {
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
  if (!g.images.empty() && !(ctx.vision && ctx.vision->has_vision()))
    throw ApiError::bad_request(
        "Invalid 'messages': this server has no vision projector (--mmproj)", "messages",
        "invalid_value");
  if (!g.audio.empty() && !(ctx.vision && ctx.vision->has_audio()))
    throw ApiError::bad_request(
        "Invalid 'messages': this server has no audio encoder (--mmproj with an audio projector)",
        "messages", "invalid_value");
  const std::vector<TextSegment> text = chat_segments(ctx.engine.chat_template(), g);
  if (!g.images.empty() || !g.audio.empty()) {
    try {
      MediaPrompt p = ctx.vision->build(text, /*add_bos=*/true, g.images, g.audio);
      media = std::move(p.media);
      return std::move(p.tokens);
    } catch (const InvalidArgument& e) {
      throw ApiError::bad_request(std::string("Invalid 'messages': ") + e.what(), "messages",
                                  "invalid_value");
    }
  }
  // Message content is tokenized literally: only the template's markers are control tokens.
  return tok.encode(text, /*add_bos=*/true);
}

// logit_bias keys are token ids of this model's vocabulary.
void check_logit_bias(ServerContext& ctx, const SamplingParams& p) {
  for (const auto& [id, bias] : p.logit_bias)
    if (id >= ctx.engine.n_vocab())
      throw ApiError::bad_request("Invalid value for 'logit_bias': key '" + std::to_string(id) +
                                      "' is not a token id of this model (its vocabulary has " +
                                      std::to_string(ctx.engine.n_vocab()) + " tokens).",
                                  "logit_bias", "invalid_value");
}

// The adapter a request runs with: "model": "<base>:<NAME>" or the "lora"
// field (both may be given if they agree). Sets *name to the adapter's name.
LoraSelection resolve_lora(ServerContext& ctx, const GenerationRequest& g, std::string* name) {
  const std::string prefix = ctx.model_id + ":";
  if (g.model.size() > prefix.size() && g.model.starts_with(prefix)) {
    *name = g.model.substr(prefix.size());
    if (!ctx.engine.adapters().find(*name)) {
      throw ApiError(404, "invalid_request_error",
                     "The model " + fields::quoted(g.model) + " does not exist.", "model",
                     "model_not_found");
    }
  }
  if (!g.lora.empty()) {
    if (!name->empty() && *name != g.lora) {
      throw ApiError::bad_request("'model' picks adapter " + fields::quoted(*name) +
                                      " but 'lora' names " + fields::quoted(g.lora) + ".",
                                  "lora", "invalid_value");
    }
    *name = g.lora;
  }
  if (name->empty()) return {};
  auto adapter = ctx.engine.adapters().find(*name);
  if (!adapter) {
    throw ApiError::bad_request("No LoRA adapter named " + fields::quoted(*name) + " is loaded.",
                                "lora", "invalid_value");
  }
  return {std::move(adapter), g.lora_scale};
}

// Submits one sequence. Throws ApiError: 400, 429 (queue full), 503 (shutting
// down, or a request the memory budget could never hold).
void submit_one(ServerContext& ctx, sched::Request r, const char* param) {
  // The scheduler checks the prompt, once, against every limit.
  sched::SubmitStatus status;
  try {
    status = ctx.scheduler.submit(std::move(r));
  } catch (const sched::PromptTooLongError& e) {
    throw ApiError::bad_request(e.what(), param, "context_length_exceeded");
  } catch (const sched::InsufficientMemoryError& e) {
    throw ApiError(503, "server_error", e.what(), param, "insufficient_memory");
  } catch (const InvalidArgument& e) {
    throw ApiError::bad_request(e.what(), param, "invalid_value");
  }
  switch (status) {
    case sched::SubmitStatus::Accepted:
      break;
    case sched::SubmitStatus::QueueFull:
      throw ApiError(429, "rate_limit_exceeded",
                     "The server is overloaded: too many requests are waiting. Retry later.", {},
                     "queue_full");
    case sched::SubmitStatus::ShuttingDown:
      throw ApiError(503, "server_error", "The server is shutting down.", {}, "shutting_down");
  }
}

}  // namespace

ChatInput chat_input(const GenerationRequest& g) {
  ChatInput in;
  in.messages.reserve(g.messages.size());
  for (const auto& m : g.messages) {
    ChatMessage& cm = in.messages.emplace_back();
    cm.role = m.role;
    cm.content = m.content;
    cm.tool_call_id = m.tool_call_id;
    cm.reasoning_content = m.reasoning_content;
    for (const auto& c : m.tool_calls) cm.tool_calls.push_back({c.name, c.arguments, c.id});
  }
  if (g.uses_tools())
    for (const ToolSpec& t : g.tools) in.tools.push_back({t.name, t.description, t.parameters});
  if (g.chat_template_kwargs.is_object()) in.kwargs = &g.chat_template_kwargs;
  return in;
}

std::vector<TextSegment> chat_segments(const ChatTemplate& tmpl, const GenerationRequest& g,
                                       bool add_generation_prompt) {
  const ChatInput in = chat_input(g);
  try {
    return tmpl.segments(in.messages, add_generation_prompt, in.tools, in.kwargs);
  } catch (const InvalidArgument& e) {
    throw ApiError::bad_request(std::string("Invalid 'messages': ") + e.what(), "messages",
                                "invalid_value");
  }
}

ToolCallSyntax call_syntax(const ChatToolFormat& f) {
  ToolCallSyntax s{f.open, f.close, f.args_key};
  s.form = f.form == ChatToolFormat::Form::List    ? ToolCallSyntax::Form::List
           : f.form == ChatToolFormat::Form::Named ? ToolCallSyntax::Form::Named
           : f.form == ChatToolFormat::Form::Xml   ? ToolCallSyntax::Form::Xml
                                                   : ToolCallSyntax::Form::Object;
  s.name_sep = f.name_sep;
  s.wrap_open = f.wrap_open;
  s.wrap_close = f.wrap_close;
  s.key_open = f.key_open;
  s.key_close = f.key_close;
  s.value_close = f.value_close;
  return s;
}

ToolCallSyntax tool_syntax(ServerContext& ctx) {
  return call_syntax(ctx.engine.chat_template().tool_format());
}

Submission submit_generation(ServerContext& ctx, const GenerationRequest& g, const std::string& rid,
                             const std::string& client, sched::Stream::Notify notify) {
  // Every API shape that generates (chat, completions, responses, messages,
  // WebSocket) comes through here: an encoder only embeds.
  if (const ModelConfig& c = ctx.engine.config(); !c.generates())
    throw ApiError::bad_request("The served model (" + c.arch +
                                    ") is an embedding model: it serves /v1/embeddings and "
                                    "cannot generate text.",
                                "model", "model_not_supported");
  check_logit_bias(ctx, g.params);
  if (g.spec_type == "draft" && !ctx.opts.draft_model)
    throw ApiError::bad_request(
        "speculative.type 'draft' needs a draft model; this server has "
        "none (tern serve --draft-model FILE).",
        "speculative.type");
  const sched::SpecSource spec_source = g.spec_type == "draft"   ? sched::SpecSource::Draft
                                        : g.spec_type == "ngram" ? sched::SpecSource::Ngram
                                                                 : sched::SpecSource::Auto;
  std::string lora_name;
  const LoraSelection lora = resolve_lora(ctx, g, &lora_name);
  std::vector<vision::MediaSpan> media;
  std::vector<int32_t> ids = prompt_tokens(ctx, g, media);
  const char* param = g.kind == GenerationRequest::Kind::Chat ? "messages" : "prompt";
  Submission s;
  s.prompt_tokens = int(ids.size());
  s.meta = ResponseMeta{response_id(g.kind, rid), unix_now(),
                        lora_name.empty() ? ctx.model_id : ctx.model_id + ":" + lora_name, g.kind};
  if (g.echo) s.echo = g.prompt;
  if (g.kind == GenerationRequest::Kind::Chat && ctx.split_reasoning) {
    s.split_reasoning = true;
    // Templates that force thinking end the prompt with the open tag (and a newline).
    const Tokenizer& tok = ctx.engine.tokenizer();
    for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
      if (*it == ctx.think_open) {
        s.in_reasoning = true;
        break;
      }
      const std::string piece = tok.token_to_piece(*it, true);
      if (piece.find_first_not_of(" \t\r\n") != std::string::npos) break;
    }
  }
  s.tool_syntax = tool_syntax(ctx);
  const bool forced = g.tool_choice == ToolChoice::Required || g.tool_choice == ToolChoice::Named;
  if (forced && s.tool_syntax.form != ToolCallSyntax::Form::Object)
    s.tool_syntax = ToolCallSyntax{};
  const SamplingParams params = tool_constrained_params(g, s.tool_syntax);
  // Predicted Outputs: the expected text as tokens (plain text: never control tokens).
  std::vector<int32_t> prediction;
  if (!g.prediction.empty()) {
    prediction = ctx.engine.tokenizer().encode(g.prediction, /*add_bos=*/false,
                                               /*parse_special=*/false);
    if (int(prediction.size()) > ctx.engine.n_ctx())
      throw ApiError::bad_request("'prediction' is " + std::to_string(prediction.size()) +
                                      " tokens, longer than the context (" +
                                      std::to_string(ctx.engine.n_ctx()) + ").",
                                  "prediction", "invalid_value");
  }
  // Choice i samples with seed + i, so a seeded request replays every choice.
  for (int i = 0; i < g.n; ++i) {
    auto stream = std::make_shared<sched::Stream>(notify);
    sched::Request r;
    r.id = g.n == 1 ? rid : rid + "/" + std::to_string(i);
    r.prompt = i + 1 < g.n ? ids : std::move(ids);
    r.params = params;
    if (g.params.seed != kRandomSeed) r.params.seed = g.params.seed + uint64_t(i);
    r.stream = stream;
    r.client = client;
    r.session = g.session;
    r.lora = lora;
    r.media = media;
    r.prediction = prediction;
    r.draft_max = g.spec_max_tokens;
    r.spec_source = spec_source;
    if (i > 0) r.after = s.streams[0];
    try {
      submit_one(ctx, std::move(r), param);
    } catch (...) {
      for (const auto& earlier : s.streams) ctx.scheduler.cancel(earlier);
      throw;
    }
    s.streams.push_back(std::move(stream));
  }
  s.stream = s.streams[0];
  ctx.log->debug("[{}] submitted: {} prompt tokens, max_tokens={}", rid, s.prompt_tokens,
                 g.params.max_tokens);
  return s;
}

awaitable<Submission> prepare_generation(ServerContext& ctx, const GenerationRequest& g,
                                         const std::string& rid, const std::string& client,
                                         sched::Stream::Notify notify) {
  co_return co_await net::co_spawn(
      ctx.prep,
      [&]() -> awaitable<Submission> {
        co_return submit_generation(ctx, g, rid, client, std::move(notify));
      },
      net::use_awaitable);
}

}  // namespace tern::server
