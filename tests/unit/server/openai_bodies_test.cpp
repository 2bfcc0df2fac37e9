#include "tern/server/openai_bodies.h"

#include <gtest/gtest.h>

namespace tern::server {
namespace {

using json = nlohmann::json;

sched::Finish finish(sched::FinishReason r, int prompt, int completion) {
  sched::Finish f;
  f.reason = r;
  f.usage.prompt_tokens = prompt;
  f.usage.completion_tokens = completion;
  f.timings.prompt_n = prompt;
  f.timings.prompt_ms = 20;
  f.timings.predicted_n = completion;
  f.timings.predicted_ms = 90;
  return f;
}

const ResponseMeta kChat{"chatcmpl-1", 1700000000, "smol", GenerationRequest::Kind::Chat};
const ResponseMeta kText{"cmpl-1", 1700000000, "smol", GenerationRequest::Kind::Completion};

TEST(OpenAiBodies, ChatCompletionBody) {
  const json j = completion_body(kChat, "Hello!", finish(sched::FinishReason::Length, 10, 4));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["model"], "smol");
  EXPECT_EQ(j["created"], 1700000000);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello!");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  EXPECT_EQ(j["usage"]["total_tokens"], 14);
  EXPECT_EQ(j["timings"]["prompt_n"], 10);
  EXPECT_EQ(j["timings"]["predicted_n"], 4);
  // 4 tokens span 3 gaps over 90 ms.
  EXPECT_NEAR(j["timings"]["predicted_per_second"].get<double>(), 1000.0 * 3 / 90, 1e-9);
  EXPECT_NEAR(j["timings"]["prompt_per_second"].get<double>(), 500.0, 1e-9);
}

TEST(OpenAiBodies, TextCompletionBody) {
  const json j = completion_body(kText, "abc", finish(sched::FinishReason::Stop, 3, 2));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "abc");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(j["choices"][0].contains("message"));
}

TEST(OpenAiBodies, ChatChunksInOrder) {
  const json role = chunk_role(kChat, false);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(role.contains("usage"));

  const json text = chunk_text(kChat, "Hi", true);
  EXPECT_EQ(text["choices"][0]["delta"]["content"], "Hi");
  EXPECT_FALSE(text["choices"][0]["delta"].contains("role"));
  EXPECT_TRUE(text.contains("usage"));
  EXPECT_TRUE(text["usage"].is_null());

  const json fin = chunk_finish(kChat, finish(sched::FinishReason::Stop, 5, 1), false);
  EXPECT_EQ(fin["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(fin["choices"][0]["delta"].empty());
  EXPECT_TRUE(fin.contains("timings"));

  const json usage = chunk_usage(kChat, finish(sched::FinishReason::Stop, 5, 1));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 6);
}

TEST(OpenAiBodies, CancelledReadsAsStop) {
  EXPECT_STREQ(openai_finish_reason(sched::FinishReason::Cancelled), "stop");
  EXPECT_STREQ(openai_finish_reason(sched::FinishReason::Length), "length");
}

TEST(OpenAiBodies, ErrorShape) {
  const json j =
      error_body(ApiError::bad_request("Bad temperature", "temperature", "invalid_value"));
  EXPECT_EQ(j["error"]["message"], "Bad temperature");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_EQ(j["error"]["code"], "invalid_value");
  const json k = error_body(ApiError(429, "rate_limit_exceeded", "busy"));
  EXPECT_TRUE(k["error"]["param"].is_null());
  EXPECT_TRUE(k["error"]["code"].is_null());
}

TEST(OpenAiBodies, SseFramingAndInvalidUtf8) {
  const std::string ev = sse_event(json{{"a", 1}});
  EXPECT_EQ(ev, "data: {\"a\":1}\n\n");
  // Never throws on bytes that are not UTF-8: they become U+FFFD.
  const std::string bad = dump(json{{"t", std::string("x\xff")}});
  EXPECT_EQ(bad, "{\"t\":\"x\xEF\xBF\xBD\"}");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

}  // namespace
}  // namespace tern::server
