#pragma once
// Per-request sampling settings, as a user sends them (CLI flags or the
// OpenAI request body). validate() is the single place their ranges live.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tern {

// SamplingParams::seed value that asks for a fresh random seed.
inline constexpr uint64_t kRandomSeed = 0xFFFFFFFFFFFFFFFFull;

// Bounds enforced by validate().
inline constexpr int kMaxRepeatLastN = 65536;  // tokens in the repeat-penalty window
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 256;  // per stop string
inline constexpr float kMaxTemperature = 100.0f;
inline constexpr int kMaxTopLogprobs = 20;        // alternatives per token (OpenAI's bound)
inline constexpr size_t kMaxLogitBias = 1024;     // entries in logit_bias
inline constexpr float kMaxLogitBiasValue = 100;  // |bias|; -100 bans the token

// What the output must be: free text, any JSON object, or JSON matching a
// schema (see json_schema.h for the keywords enforced).
enum class ResponseFormat { Text, JsonObject, JsonSchema };

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy (argmax, ties -> lowest id)
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  // llama.cpp-style: logit > 0 ? logit / p : logit * p, once per distinct token
  // among the last repeat_last_n tokens of history (prompt and generated).
  // repeat_last_n: 0 turns it off, -1 means the whole history.
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  // OpenAI-style, over generated tokens only:
  // logit -= count * frequency_penalty + (count > 0) * presence_penalty.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  uint64_t seed = kRandomSeed;    // kRandomSeed: random; any other value: deterministic
  int max_tokens = -1;            // -1: until EOS / end of context
  std::vector<std::string> stop;  // stop strings (see StopMatcher)
  bool ignore_eos = false;
  ResponseFormat response_format = ResponseFormat::Text;
  std::string json_schema;  // the schema as JSON text, for ResponseFormat::JsonSchema
  // A frame around the JSON value (tool calls, see tool_calls.h): the output is
  // json_open, the value, json_close; with json_repeat, one or more such framed
  // values separated by "\n". Empty strings and false: the bare value.
  std::string json_open, json_close;
  bool json_repeat = false;
  // Non-empty: decoding is free until the output writes this text (the start
  // of json_open); the framed value after it is constrained, then free again.
  std::string json_trigger;
  // Added to a token's logit before the penalties; a bias of -100 bans the
  // token (its logit becomes -inf). Ids are checked against the vocabulary by
  // the Sampler.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // -1: no log probabilities; k >= 0: report the sampled token's log
  // probability and the k most likely alternatives (k <= kMaxTopLogprobs),
  // from the model's raw logits (see logprobs.h).
  int logprobs = -1;

  // Checks every range: temperature finite in [0, kMaxTemperature]; top_p in
  // (0, 1]; min_p in [0, 1]; repeat_penalty finite and > 0; repeat_last_n in
  // [-1, kMaxRepeatLastN]; frequency/presence penalties in [-2, 2];
  // max_tokens >= -1; logprobs in [-1, kMaxTopLogprobs]; at most
  // kMaxLogitBias logit_bias entries, ids >= 0, biases finite in
  // [-kMaxLogitBiasValue, kMaxLogitBiasValue]; at most kMaxStopStrings stop strings, each non-empty
  // and at most kMaxStopBytes bytes; a JsonSchema format's schema compiles. top_k and seed accept
  // any value. Throws InvalidArgument whose message names the offending field (SchemaError, naming
  // the keyword, for the schema).
  void validate() const;
};

}  // namespace tern
