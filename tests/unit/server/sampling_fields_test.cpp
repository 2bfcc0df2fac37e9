// The sampling-field tables every API shape reads its request through.
#include "../../../src/server/sampling_fields.h"

#include <gtest/gtest.h>

#include <string>

#include "tern/server/api_error.h"

namespace tern::server {
namespace {

using json = nlohmann::json;

std::string error_of(const json& body, std::span<const SamplingField> table) {
  SamplingParams p;
  try {
    read_sampling(body, table, p);
  } catch (const ApiError& e) {
    return e.param() + ": " + e.what();
  }
  return "";
}

TEST(SamplingFields, AZeroTopPIsGreedyInEveryApi) {
  for (auto table : {kOpenAiSampling, kAnthropicSampling, kResponsesSampling}) {
    SamplingParams p;
    read_sampling(json{{"top_p", 0}}, table, p);
    EXPECT_EQ(p.top_k, 1);
    EXPECT_EQ(p.top_p, 1.0f);
    SamplingParams q;
    read_sampling(json{{"top_p", 0.5}}, table, q);
    EXPECT_EQ(q.top_p, 0.5f);
    EXPECT_EQ(q.top_k, SamplingParams{}.top_k);
  }
}

TEST(SamplingFields, RangesFollowEachApi) {
  // Anthropic's temperature stops at 1, OpenAI's at 2.
  EXPECT_EQ(error_of(json{{"temperature", 1.5}}, kOpenAiSampling), "");
  EXPECT_EQ(error_of(json{{"temperature", 1.5}}, kAnthropicSampling),
            "temperature: Invalid value for 'temperature': 1.5 is out of range. Expected a value "
            "between 0 and 1.");
  EXPECT_EQ(error_of(json{{"top_k", -1}}, kOpenAiSampling),
            "top_k: Invalid value for 'top_k': must be >= 0.");
  EXPECT_EQ(error_of(json{{"repeat_penalty", 0}}, kOpenAiSampling),
            "repeat_penalty: Invalid value for 'repeat_penalty': must be greater than 0.");
  EXPECT_EQ(error_of(json{{"temperature", "hot"}}, kResponsesSampling).substr(0, 13),
            "temperature: ");
  // A field another API has is not read (its unknown-field policy decides).
  EXPECT_EQ(error_of(json{{"top_k", -1}}, kResponsesSampling), "");
}

TEST(SamplingFields, ValuesLandWhereTheyBelong) {
  SamplingParams p;
  read_sampling(json{{"temperature", 0.25},
                     {"presence_penalty", -1},
                     {"frequency_penalty", 1.5},
                     {"seed", int64_t(1) << 60},
                     {"top_k", int64_t(1) << 40},
                     {"min_p", 0.1},
                     {"repeat_penalty", 1.1},
                     {"repeat_last_n", -1},
                     {"ignore_eos", true}},
                kOpenAiSampling, p);
  EXPECT_EQ(p.temperature, 0.25f);
  EXPECT_EQ(p.presence_penalty, -1.0f);
  EXPECT_EQ(p.frequency_penalty, 1.5f);
  EXPECT_EQ(p.seed, uint64_t(1) << 60);  // all 64 bits, not through a double
  EXPECT_EQ(p.top_k, std::numeric_limits<int>::max());
  EXPECT_EQ(p.min_p, 0.1f);
  EXPECT_EQ(p.repeat_penalty, 1.1f);
  EXPECT_EQ(p.repeat_last_n, -1);
  EXPECT_TRUE(p.ignore_eos);
}

TEST(SamplingFields, EchoRepeatsWhatWasRead) {
  SamplingParams p;
  json echo = json::object();
  read_sampling(json{{"temperature", 1}, {"top_p", 0.9}, {"other", 3}}, kResponsesSampling, p,
                &echo);
  EXPECT_EQ(echo, (json{{"temperature", 1.0}, {"top_p", 0.9}}));
}

}  // namespace
}  // namespace tern::server
