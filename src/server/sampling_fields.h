#pragma once
// The sampling fields of every API shape, declared once: a table per API of
// (wire name, type, accepted range, where it lands in SamplingParams), read
// by one function. OpenAI chat and completions (and the WebSocket's
// `generate`), Anthropic Messages and the Responses API each list the fields
// they accept; the rules a field carries (a zero top_p means greedy, top_k is
// clamped to int) are written once, in the field.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>

#include "tern/sampling/params.h"

namespace tern::server {

struct SamplingField {
  enum class Type : uint8_t { Number, Integer, Bool };
  // What a value must satisfy: Closed lo <= v <= hi ("out of range"),
  // NonNegative v >= 0, Positive v > 0, Any nothing.
  enum class Bound : uint8_t { Closed, NonNegative, Positive, Any };
  // A read value: `number` for Number, `integer` for Integer, `flag` for Bool.
  struct Value {
    double number = 0;
    int64_t integer = 0;
    bool flag = false;
  };

  const char* name;
  Type type;
  Bound bound;
  double lo = 0, hi = 0;  // Closed only
  // Where the value lands: a float member (Number), an int member (Integer,
  // clamped to int), a bool member (Bool), or a mapping of its own.
  float SamplingParams::*real = nullptr;
  int SamplingParams::*whole = nullptr;
  bool SamplingParams::*flag = nullptr;
  void (*apply)(SamplingParams& p, const Value& v) = nullptr;
};

// OpenAI chat completions and completions (and the WebSocket's generate).
extern const std::span<const SamplingField> kOpenAiSampling;
// Anthropic Messages: temperature in [0, 1], top_p, top_k.
extern const std::span<const SamplingField> kAnthropicSampling;
// The Responses API: temperature, top_p.
extern const std::span<const SamplingField> kResponsesSampling;

// Reads every field of `table` present in `body` into `p`, in table order;
// the first bad one throws ApiError (400 naming the field). `echo`, when
// given, gets each field read, as the request gave it.
void read_sampling(const nlohmann::json& body, std::span<const SamplingField> table,
                   SamplingParams& p, nlohmann::json* echo = nullptr);

// SamplingParams::validate as an API error (400).
void validate_sampling(const SamplingParams& p);

}  // namespace tern::server
