#include "tern/sampling/params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "tern/core/error.h"

namespace tern {
namespace {

// Applies `change` to default params and expects validate() to reject them
// with a message that names `field`.
void expect_rejected(const std::string& field, const std::function<void(SamplingParams&)>& change) {
  SamplingParams p;
  change(p);
  try {
    p.validate();
    ADD_FAILURE() << "validate() accepted a bad " << field;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(SamplingParams, DefaultsAreValid) {
  EXPECT_NO_THROW(SamplingParams{}.validate());
}

TEST(SamplingParams, AcceptsEdgesOfEveryRange) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.top_k = -5;
  p.repeat_last_n = -1;
  p.frequency_penalty = -2.0f;
  p.presence_penalty = 2.0f;
  p.max_tokens = -1;
  p.seed = 0;
  p.stop = std::vector<std::string>(kMaxStopStrings, std::string(kMaxStopBytes, 'x'));
  EXPECT_NO_THROW(p.validate());
  p.min_p = 0.0f;
  p.repeat_last_n = kMaxRepeatLastN;
  p.max_tokens = 0;
  EXPECT_NO_THROW(p.validate());
}

TEST(SamplingParams, RejectsEachBadFieldByName) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  expect_rejected("temperature", [](SamplingParams& p) { p.temperature = -0.1f; });
  expect_rejected("temperature", [&](SamplingParams& p) { p.temperature = nan; });
  expect_rejected("temperature", [&](SamplingParams& p) { p.temperature = inf; });
  expect_rejected("top_p", [](SamplingParams& p) { p.top_p = 0.0f; });
  expect_rejected("top_p", [](SamplingParams& p) { p.top_p = 1.5f; });
  expect_rejected("top_p", [&](SamplingParams& p) { p.top_p = nan; });
  expect_rejected("min_p", [](SamplingParams& p) { p.min_p = -0.01f; });
  expect_rejected("min_p", [](SamplingParams& p) { p.min_p = 1.01f; });
  expect_rejected("repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = 0.0f; });
  expect_rejected("repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = -1.0f; });
  expect_rejected("repeat_penalty", [&](SamplingParams& p) { p.repeat_penalty = inf; });
  expect_rejected("repeat_last_n", [](SamplingParams& p) { p.repeat_last_n = -2; });
  expect_rejected("repeat_last_n",
                  [](SamplingParams& p) { p.repeat_last_n = kMaxRepeatLastN + 1; });
  expect_rejected("frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = 2.5f; });
  expect_rejected("frequency_penalty", [&](SamplingParams& p) { p.frequency_penalty = nan; });
  expect_rejected("presence_penalty", [](SamplingParams& p) { p.presence_penalty = -2.5f; });
  expect_rejected("max_tokens", [](SamplingParams& p) { p.max_tokens = -2; });
  expect_rejected("stop", [](SamplingParams& p) { p.stop = {"ok", ""}; });
  expect_rejected("stop",
                  [](SamplingParams& p) { p.stop = {std::string(kMaxStopBytes + 1, 'x')}; });
  expect_rejected("stop", [](SamplingParams& p) {
    p.stop = std::vector<std::string>(kMaxStopStrings + 1, "x");
  });
}

TEST(SamplingParams, MessageShowsTheBadValue) {
  SamplingParams p;
  p.top_p = 1.5f;
  try {
    p.validate();
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("1.5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tern
