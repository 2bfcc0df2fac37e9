#include "tern/server/openai_choices.h"

#include <cmath>

namespace tern::server {
namespace {

using json = nlohmann::json;

bool is_chat(const ResponseMeta& m) {
  return m.kind == GenerationRequest::Kind::Chat;
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

json chunk_envelope(const ResponseMeta& m, bool include_usage) {
  json j{{"id", m.id},
         {"object", is_chat(m) ? "chat.completion.chunk" : "text_completion"},
         {"created", m.created},
         {"model", m.model},
         {"system_fingerprint", "tern"}};
  if (include_usage) j["usage"] = nullptr;
  return j;
}

}  // namespace

double logprob_value(float lp) {
  return std::isfinite(lp) ? double(lp) : -9999.0;
}

json chat_logprobs(std::span<const TokenLogprob> lps, const TokenText& text) {
  json content = json::array();
  for (const TokenLogprob& t : lps) {
    json top = json::array();
    for (const auto& [id, lp] : t.top) {
      const std::string s = text(id);
      top.push_back(json{{"token", s}, {"logprob", logprob_value(lp)}, {"bytes", bytes_of(s)}});
    }
    const std::string s = text(t.token);
    content.push_back(json{{"token", s},
                           {"logprob", logprob_value(t.logprob)},
                           {"bytes", bytes_of(s)},
                           {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}, {"refusal", nullptr}};
}

json completion_logprobs(std::span<const TokenLogprob> lps, const TokenText& text, size_t& offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprob& t : lps) {
    const std::string s = text(t.token);
    tokens.push_back(s);
    token_logprobs.push_back(logprob_value(t.logprob));
    json alts = json::object();
    for (const auto& [id, lp] : t.top) alts[text(id)] = logprob_value(lp);
    alts[s] = logprob_value(t.logprob);  // the sampled token is always listed
    top.push_back(std::move(alts));
    offsets.push_back(offset);
    offset += s.size();
  }
  return json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top)},
              {"text_offset", std::move(offsets)}};
}

void append_logprobs(json& all, const json& more) {
  if (all.is_null()) {
    all = more;
    return;
  }
  for (auto& [key, v] : more.items())
    if (v.is_array())
      for (const auto& e : v) all[key].push_back(e);
}

json choice_role_chunk(const ResponseMeta& m, int index, bool include_usage) {
  json j = chunk_envelope(m, include_usage);
  j["choices"] = json::array({json{{"index", index},
                                   {"delta", {{"role", "assistant"}, {"content", ""}}},
                                   {"logprobs", nullptr},
                                   {"finish_reason", nullptr}}});
  return j;
}

json choice_text_chunk(const ResponseMeta& m, int index, const std::string& text,
                       const json& logprobs, bool include_usage) {
  json j = chunk_envelope(m, include_usage);
  json c{{"index", index}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
  if (is_chat(m))
    c["delta"] = {{"content", text}};
  else
    c["text"] = text;
  j["choices"] = json::array({std::move(c)});
  return j;
}

json choice_finish_chunk(const ResponseMeta& m, int index, const sched::Finish& f,
                         bool include_usage) {
  json j = chunk_envelope(m, include_usage);
  json c{
      {"index", index}, {"logprobs", nullptr}, {"finish_reason", openai_finish_reason(f.reason)}};
  if (is_chat(m))
    c["delta"] = json::object();
  else
    c["text"] = "";
  j["choices"] = json::array({std::move(c)});
  j["timings"] = timings_json(f.timings);
  return j;
}

sched::Usage sum_usage(std::span<const sched::Finish> f) {
  sched::Usage u;
  if (f.empty()) return u;
  u.prompt_tokens = f[0].usage.prompt_tokens;
  u.cached_tokens = f[0].usage.cached_tokens;
  for (const auto& x : f) {
    u.completion_tokens += x.usage.completion_tokens;
    u.accepted_prediction_tokens += x.usage.accepted_prediction_tokens;
    u.rejected_prediction_tokens += x.usage.rejected_prediction_tokens;
  }
  return u;
}

json choices_body(const ResponseMeta& m, std::span<const ChoiceResult> choices) {
  json j{{"id", m.id},
         {"object", is_chat(m) ? "chat.completion" : "text_completion"},
         {"created", m.created},
         {"model", m.model},
         {"system_fingerprint", "tern"}};
  json arr = json::array();
  std::vector<sched::Finish> finishes;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    json choice{{"index", int(i)},
                {"logprobs", c.logprobs},
                {"finish_reason", openai_finish_reason(c.finish.reason)}};
    if (is_chat(m))
      choice["message"] = {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}};
    else
      choice["text"] = c.text;
    arr.push_back(std::move(choice));
    finishes.push_back(c.finish);
  }
  j["choices"] = std::move(arr);
  j["usage"] = usage_json(sum_usage(finishes));
  if (!choices.empty()) j["timings"] = timings_json(choices[0].finish.timings);
  return j;
}

json choices_usage_chunk(const ResponseMeta& m, std::span<const sched::Finish> f) {
  json j = chunk_envelope(m, false);
  j["choices"] = json::array();
  j["usage"] = usage_json(sum_usage(f));
  if (!f.empty()) j["timings"] = timings_json(f[0].timings);
  return j;
}

}  // namespace tern::server
