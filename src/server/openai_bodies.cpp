#include "tern/server/openai_bodies.h"

namespace tern::server {
namespace {

using json = nlohmann::json;

bool is_chat(const ResponseMeta& m) {
  return m.kind == GenerationRequest::Kind::Chat;
}

json envelope(const ResponseMeta& m, const char* object) {
  return json{{"id", m.id},
              {"object", object},
              {"created", m.created},
              {"model", m.model},
              {"system_fingerprint", "tern"}};
}

json chunk_envelope(const ResponseMeta& m, bool include_usage) {
  json j = envelope(m, is_chat(m) ? "chat.completion.chunk" : "text_completion");
  if (include_usage) j["usage"] = nullptr;  // OpenAI sends null until the usage chunk
  return j;
}

json choice_text(const ResponseMeta& m, const std::string& text, const json& finish_reason) {
  if (is_chat(m))
    return json{{"index", 0},
                {"delta", {{"content", text}}},
                {"logprobs", nullptr},
                {"finish_reason", finish_reason}};
  return json{
      {"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
}

}  // namespace

const char* openai_finish_reason(sched::FinishReason r) {
  return r == sched::FinishReason::Length ? "length" : "stop";
}

json usage_json(const sched::Usage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
              {"completion_tokens_details",
               {{"accepted_prediction_tokens", u.accepted_prediction_tokens},
                {"rejected_prediction_tokens", u.rejected_prediction_tokens}}}};
}

json timings_json(const sched::Timings& t) {
  auto per_second = [](int n, double ms) { return ms > 0 ? 1000.0 * n / ms : 0.0; };
  auto per_token = [](int n, double ms) { return n > 0 ? ms / n : 0.0; };
  // Generation speed counts the gaps between tokens: n tokens span n-1 gaps.
  const int gaps = t.predicted_n > 1 ? t.predicted_n - 1 : 0;
  json j{{"cache_n", t.cache_n},
         {"cache_dram_n", t.cache_dram_n},
         {"cache_flash_n", t.cache_flash_n},
         {"preemptions", t.preemptions},
         {"prompt_n", t.prompt_n},
         {"prompt_ms", t.prompt_ms},
         {"prompt_per_token_ms", per_token(t.prompt_n, t.prompt_ms)},
         {"prompt_per_second", per_second(t.prompt_n, t.prompt_ms)},
         {"predicted_n", t.predicted_n},
         {"predicted_ms", t.predicted_ms},
         {"predicted_per_token_ms", per_token(gaps, t.predicted_ms)},
         {"predicted_per_second", per_second(gaps, t.predicted_ms)},
         {"queue_ms", t.queue_ms},
         {"ttft_ms", t.ttft_ms}};
  if (!t.finish_detail.empty()) j["finish_detail"] = t.finish_detail;
  if (t.session_cache_n >= 0) j["session_cache_n"] = t.session_cache_n;
  if (t.draft_n > 0) {
    j["draft_n"] = t.draft_n;
    j["draft_accepted_n"] = t.draft_accepted_n;
  }
  if (t.prediction_accepted_n + t.prediction_rejected_n > 0) {
    j["prediction_accepted_n"] = t.prediction_accepted_n;
    j["prediction_rejected_n"] = t.prediction_rejected_n;
  }
  if (t.image_n > 0) {
    j["image_n"] = t.image_n;
    j["image_cache_hits"] = t.image_cache_hits;
    j["image_encode_ms"] = t.image_encode_ms;
  }
  if (t.audio_n > 0) {
    j["audio_n"] = t.audio_n;
    j["audio_cache_hits"] = t.audio_cache_hits;
    j["audio_encode_ms"] = t.audio_encode_ms;
  }
  return j;
}

json completion_body(const ResponseMeta& m, const std::string& text, const sched::Finish& f) {
  json j = envelope(m, is_chat(m) ? "chat.completion" : "text_completion");
  json choice;
  if (is_chat(m)) {
    choice = json{{"index", 0},
                  {"message", {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}}},
                  {"logprobs", nullptr},
                  {"finish_reason", openai_finish_reason(f.reason)}};
  } else {
    choice = json{{"index", 0},
                  {"text", text},
                  {"logprobs", nullptr},
                  {"finish_reason", openai_finish_reason(f.reason)}};
  }
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(f.usage);
  j["timings"] = timings_json(f.timings);
  return j;
}

json chunk_role(const ResponseMeta& m, bool include_usage) {
  json j = chunk_envelope(m, include_usage);
  j["choices"] = json::array({json{{"index", 0},
                                   {"delta", {{"role", "assistant"}, {"content", ""}}},
                                   {"logprobs", nullptr},
                                   {"finish_reason", nullptr}}});
  return j;
}

json chunk_text(const ResponseMeta& m, const std::string& text, bool include_usage) {
  json j = chunk_envelope(m, include_usage);
  j["choices"] = json::array({choice_text(m, text, nullptr)});
  return j;
}

json chunk_finish(const ResponseMeta& m, const sched::Finish& f, bool include_usage) {
  json j = chunk_envelope(m, include_usage);
  json choice = choice_text(m, "", openai_finish_reason(f.reason));
  if (is_chat(m)) choice["delta"] = json::object();
  j["choices"] = json::array({choice});
  j["timings"] = timings_json(f.timings);
  return j;
}

json chunk_usage(const ResponseMeta& m, const sched::Finish& f) {
  json j = chunk_envelope(m, false);
  j["choices"] = json::array();
  j["usage"] = usage_json(f.usage);
  j["timings"] = timings_json(f.timings);
  return j;
}

json tool_calls_json(std::span<const ToolCallOut> calls) {
  json arr = json::array();
  for (const ToolCallOut& c : calls)
    arr.push_back(json{{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return arr;
}

json chunk_tool_call_head(const ResponseMeta& m, int index, const ToolCallOut& c,
                          bool include_usage) {
  json j = chunk_text(m, "", include_usage);
  j["choices"][0]["delta"] = json{
      {"tool_calls", json::array({json{{"index", index},
                                       {"id", c.id},
                                       {"type", "function"},
                                       {"function", {{"name", c.name}, {"arguments", ""}}}}})}};
  return j;
}

json chunk_tool_call_args(const ResponseMeta& m, int index, const std::string& args,
                          bool include_usage) {
  json j = chunk_text(m, "", include_usage);
  j["choices"][0]["delta"] = json{
      {"tool_calls", json::array({json{{"index", index}, {"function", {{"arguments", args}}}}})}};
  return j;
}

json error_body(const ApiError& e) {
  return json{{"error",
               {{"message", e.what()},
                {"type", e.type()},
                {"param", e.param().empty() ? json(nullptr) : json(e.param())},
                {"code", e.code().empty() ? json(nullptr) : json(e.code())}}}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

std::string sse_event(std::string_view name, const json& j) {
  return "event: " + std::string(name) + "\n" + sse_event(j);
}

}  // namespace tern::server
