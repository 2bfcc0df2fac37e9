#include "tern/sampling/params.h"

#include <cmath>
#include <string>

#include "tern/core/error.h"
#include "tern/sampling/json_schema.h"

namespace tern {
namespace {

[[noreturn]] void reject(const char* field, const std::string& rule, const std::string& got) {
  throw InvalidArgument(std::string("sampling: ") + field + " must be " + rule + ", got " + got);
}

std::string show(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = std::to_string(v);
  // "0.950000" -> "0.95"
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

void check_range(const char* field, float v, float lo, float hi) {
  if (!std::isfinite(v) || v < lo || v > hi) {
    reject(field, "in [" + show(lo) + ", " + show(hi) + "]", show(v));
  }
}

}  // namespace

void SamplingParams::validate() const {
  check_range("temperature", temperature, 0.0f, kMaxTemperature);
  if (!std::isfinite(top_p) || top_p <= 0.0f || top_p > 1.0f) {
    reject("top_p", "in (0, 1]", show(top_p));
  }
  check_range("min_p", min_p, 0.0f, 1.0f);
  if (!std::isfinite(repeat_penalty) || repeat_penalty <= 0.0f) {
    reject("repeat_penalty", "finite and > 0", show(repeat_penalty));
  }
  if (repeat_last_n < -1 || repeat_last_n > kMaxRepeatLastN) {
    reject("repeat_last_n", "in [-1, " + std::to_string(kMaxRepeatLastN) + "]",
           std::to_string(repeat_last_n));
  }
  check_range("frequency_penalty", frequency_penalty, -2.0f, 2.0f);
  check_range("presence_penalty", presence_penalty, -2.0f, 2.0f);
  if (max_tokens < -1) reject("max_tokens", ">= -1", std::to_string(max_tokens));
  if (stop.size() > kMaxStopStrings) {
    reject("stop", "at most " + std::to_string(kMaxStopStrings) + " strings",
           std::to_string(stop.size()) + " strings");
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) {
      reject("stop", "non-empty strings", "an empty string at index " + std::to_string(i));
    }
    if (stop[i].size() > kMaxStopBytes) {
      reject("stop", "strings of at most " + std::to_string(kMaxStopBytes) + " bytes",
             std::to_string(stop[i].size()) + " bytes at index " + std::to_string(i));
    }
  }
  if (logprobs < -1 || logprobs > kMaxTopLogprobs) {
    reject("logprobs", "in [-1, " + std::to_string(kMaxTopLogprobs) + "]",
           std::to_string(logprobs));
  }
  if (logit_bias.size() > kMaxLogitBias) {
    reject("logit_bias", "at most " + std::to_string(kMaxLogitBias) + " entries",
           std::to_string(logit_bias.size()) + " entries");
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) reject("logit_bias", "keyed by token ids >= 0", std::to_string(id));
    check_range("logit_bias", bias, -kMaxLogitBiasValue, kMaxLogitBiasValue);
  }
  if (response_format == ResponseFormat::JsonSchema) JsonGrammar::from_schema(json_schema);
}

}  // namespace tern
