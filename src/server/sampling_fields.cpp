#include "sampling_fields.h"

#include <algorithm>
#include <limits>

#include "json_fields.h"
#include "tern/core/error.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;
using T = SamplingField::Type;
using B = SamplingField::Bound;
using V = SamplingField::Value;

using P = SamplingParams;

// A zero nucleus keeps only the most likely token: greedy.
void top_p(P& p, const V& v) {
  p.top_p = v.number == 0.0 ? 1.0f : float(v.number);
  if (v.number == 0.0) p.top_k = 1;
}
void seed(P& p, const V& v) {
  p.seed = uint64_t(v.integer);
}  // all 64 bits

constexpr SamplingField number(const char* name, B bound, double lo, double hi, float P::*m) {
  return {name, T::Number, bound, lo, hi, m, nullptr, nullptr, nullptr};
}
constexpr SamplingField integer(const char* name, B bound, double lo, double hi, int P::*m) {
  return {name, T::Integer, bound, lo, hi, nullptr, m, nullptr, nullptr};
}

// Fields several APIs share.
constexpr SamplingField kTemperature = number("temperature", B::Closed, 0, 2, &P::temperature);
constexpr SamplingField kTopP{"top_p", T::Number, B::Closed, 0,    1,
                              nullptr, nullptr,   nullptr,   top_p};
constexpr SamplingField kTopK = integer("top_k", B::NonNegative, 0, 0, &P::top_k);

const SamplingField kOpenAi[] = {
    kTemperature,
    kTopP,
    number("presence_penalty", B::Closed, -2, 2, &P::presence_penalty),
    number("frequency_penalty", B::Closed, -2, 2, &P::frequency_penalty),
    {"seed", T::Integer, B::Any, 0, 0, nullptr, nullptr, nullptr, seed},
    // llama.cpp's extensions.
    kTopK,
    number("min_p", B::Closed, 0, 1, &P::min_p),
    number("repeat_penalty", B::Positive, 0, 0, &P::repeat_penalty),
    integer("repeat_last_n", B::Closed, -1, kMaxRepeatLastN, &P::repeat_last_n),
    {"ignore_eos", T::Bool, B::Any, 0, 0, nullptr, nullptr, &P::ignore_eos, nullptr},
};

const SamplingField kAnthropic[] = {
    number("temperature", B::Closed, 0, 1, &P::temperature),  // Anthropic's range
    kTopP,
    kTopK,
};

const SamplingField kResponses[] = {kTemperature, kTopP};

void store(const SamplingField& f, const V& v, P& p) {
  if (f.apply) {
    f.apply(p, v);
  } else if (f.real) {
    p.*f.real = float(v.number);
  } else if (f.whole) {
    p.*f.whole = int(std::clamp<int64_t>(v.integer, std::numeric_limits<int>::min(),
                                         std::numeric_limits<int>::max()));
  } else if (f.flag) {
    p.*f.flag = v.flag;
  }
}

void check_bound(const SamplingField& f, double v) {
  switch (f.bound) {
    case B::Closed:
      check_range(f.name, v, f.lo, f.hi);
      break;
    case B::NonNegative:
      if (v < 0) bad_value(f.name, "must be >= 0.");
      break;
    case B::Positive:
      if (v <= 0) bad_value(f.name, "must be greater than 0.");
      break;
    case B::Any:
      break;
  }
}

}  // namespace

const std::span<const SamplingField> kOpenAiSampling = kOpenAi;
const std::span<const SamplingField> kAnthropicSampling = kAnthropic;
const std::span<const SamplingField> kResponsesSampling = kResponses;

void read_sampling(const json& body, std::span<const SamplingField> table, SamplingParams& p,
                   json* echo) {
  for (const SamplingField& f : table) {
    V v;
    bool present = false;
    switch (f.type) {
      case T::Number:
        present = get_number(body, f.name, v.number);
        if (present) check_bound(f, v.number);
        break;
      case T::Integer:
        present = get_int(body, f.name, v.integer);
        if (present) check_bound(f, double(v.integer));
        break;
      case T::Bool:
        present = get_bool(body, f.name, v.flag);
        break;
    }
    if (!present) continue;
    store(f, v, p);
    if (echo)
      (*echo)[f.name] = f.type == T::Number    ? json(v.number)
                        : f.type == T::Integer ? json(v.integer)
                                               : json(v.flag);
  }
}

void validate_sampling(const SamplingParams& p) {
  try {
    p.validate();
  } catch (const InvalidArgument& e) {
    throw ApiError::bad_request(e.what());
  }
}

}  // namespace tern::server
