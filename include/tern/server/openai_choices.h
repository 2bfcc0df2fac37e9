#pragma once
// OpenAI response pieces for requests with several choices (n > 1) or log
// probabilities: choices carry their `index`, and `logprobs` holds OpenAI's
// shapes (chat: {content: [{token, logprob, bytes, top_logprobs}]},
// completions: {tokens, token_logprobs, top_logprobs, text_offset}). Pure
// functions of their inputs, unit-tested without a model; the token text
// comes from a callback (the tokenizer's piece for an id).
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "tern/sampling/logprobs.h"
#include "tern/sched/stream.h"
#include "tern/server/openai_bodies.h"

namespace tern::server {

// A token id's bytes as the detokenizer would emit them.
using TokenText = std::function<std::string(int32_t)>;

// A log probability as JSON: -inf (a token the model rules out) becomes
// -9999.0, as vLLM reports it, since JSON has no infinity.
double logprob_value(float lp);

// Chat: {"content": [...], "refusal": null} for the tokens in `lps`.
nlohmann::json chat_logprobs(std::span<const TokenLogprob> lps, const TokenText& text);
// Completions: the legacy shape. top_logprobs maps token text to log p for the
// top alternatives plus the sampled token. text_offset is the byte offset of
// each token in the choice's text: `offset` is where the first one starts,
// and is advanced past the last.
nlohmann::json completion_logprobs(std::span<const TokenLogprob> lps, const TokenText& text,
                                   size_t& offset);
// Appends the entries of `more` (a shape from the functions above) to `all`.
void append_logprobs(nlohmann::json& all, const nlohmann::json& more);

// Stream chunks with a choice index. logprobs: a shape above, or null.
nlohmann::json choice_role_chunk(const ResponseMeta& m, int index, bool include_usage);
nlohmann::json choice_text_chunk(const ResponseMeta& m, int index, const std::string& text,
                                 const nlohmann::json& logprobs, bool include_usage);
nlohmann::json choice_finish_chunk(const ResponseMeta& m, int index, const sched::Finish& f,
                                   bool include_usage);

// What one choice produced, for the non-streaming body.
struct ChoiceResult {
  std::string text;
  nlohmann::json logprobs;  // a shape above, or null when not asked for
  sched::Finish finish;
};

// The usage of n choices of one prompt: the prompt (and its cached part)
// counted once, completion tokens summed.
sched::Usage sum_usage(std::span<const sched::Finish> f);

// chat.completion / text_completion with every choice; usage summed, timings
// of choice 0.
nlohmann::json choices_body(const ResponseMeta& m, std::span<const ChoiceResult> choices);
// The final usage chunk (choices: []) for n choices.
nlohmann::json choices_usage_chunk(const ResponseMeta& m, std::span<const sched::Finish> f);

}  // namespace tern::server
