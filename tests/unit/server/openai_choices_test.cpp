// n > 1 and logprobs: request parsing and the OpenAI shapes (openai_choices.h).
#include "tern/server/openai_choices.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tern/server/openai_request.h"

namespace tern::server {
namespace {

using json = nlohmann::json;

json chat(json extra = json::object()) {
  json j = {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

json completion(json extra = json::object()) {
  json j = {{"model", "m"}, {"prompt", "hi"}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

std::string param_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.param();
  }
  return "(no error)";
}

TEST(OpenAiChoicesRequest, NLogprobsAndLogitBias) {
  auto r = parse_chat_request(chat({{"n", 3},
                                    {"logprobs", true},
                                    {"top_logprobs", 5},
                                    {"logit_bias", {{"12", -100}, {"7", 2.5}}}}));
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.params.logprobs, 5);
  ASSERT_EQ(r.params.logit_bias.size(), 2u);
  EXPECT_EQ(r.params.logit_bias[0], (std::pair<int32_t, float>{12, -100.0f}));
  EXPECT_EQ(r.params.logit_bias[1], (std::pair<int32_t, float>{7, 2.5f}));
  EXPECT_EQ(parse_chat_request(chat({{"logprobs", true}})).params.logprobs, 0);
  EXPECT_EQ(parse_chat_request(chat({{"logprobs", false}})).params.logprobs, -1);
  EXPECT_EQ(parse_chat_request(chat()).params.logprobs, -1);
  EXPECT_EQ(parse_completion_request(completion({{"logprobs", 2}})).params.logprobs, 2);
  EXPECT_EQ(parse_completion_request(completion({{"logprobs", nullptr}})).params.logprobs, -1);
  EXPECT_EQ(parse_completion_request(completion({{"n", 2}})).n, 2);
}

TEST(OpenAiChoicesRequest, BadValuesNameTheField) {
  EXPECT_EQ(param_of([] { parse_chat_request(chat({{"top_logprobs", 1}})); }), "top_logprobs");
  EXPECT_EQ(param_of([] {
              parse_chat_request(chat({{"logprobs", true}, {"top_logprobs", 21}}));
            }),
            "top_logprobs");
  EXPECT_EQ(param_of([] { parse_chat_request(chat({{"logprobs", 3}})); }), "logprobs");
  EXPECT_EQ(param_of([] { parse_completion_request(completion({{"logprobs", -1}})); }), "logprobs");
  EXPECT_EQ(param_of([] {
              parse_completion_request(completion({{"logprobs", true}}));
            }),
            "logprobs");
  EXPECT_EQ(param_of([] { parse_chat_request(chat({{"logit_bias", {{"a", 1}}}})); }), "logit_bias");
  EXPECT_EQ(param_of([] {
              parse_chat_request(chat({{"logit_bias", {{"-3", 1}}}}));
            }),
            "logit_bias");
  EXPECT_EQ(param_of([] {
              parse_chat_request(chat({{"logit_bias", {{"3", 101}}}}));
            }),
            "logit_bias.3");
  EXPECT_EQ(param_of([] {
              parse_chat_request(chat({{"logit_bias", {{"3", "x"}}}}));
            }),
            "logit_bias.3");
  EXPECT_EQ(param_of([] { parse_chat_request(chat({{"n", 0}})); }), "n");
  EXPECT_EQ(param_of([] {
              parse_completion_request(completion({{"echo", true}, {"logprobs", 1}}));
            }),
            "echo");
}

const TokenText kText = [](int32_t id) {
  return id == 9 ? std::string("\xE2") : "t" + std::to_string(id);
};

TEST(OpenAiChoicesShapes, ChatLogprobs) {
  const std::vector<TokenLogprob> lps = {
      {1, -0.5f, {{1, -0.5f}, {2, -1.5f}}},
      {9, -std::numeric_limits<float>::infinity(), {}},
  };
  const json j = chat_logprobs(lps, kText);
  ASSERT_EQ(j["content"].size(), 2u);
  EXPECT_TRUE(j["refusal"].is_null());
  const json& a = j["content"][0];
  EXPECT_EQ(a["token"], "t1");
  EXPECT_DOUBLE_EQ(a["logprob"].get<double>(), -0.5);
  EXPECT_EQ(a["bytes"], json::array({'t', '1'}));
  ASSERT_EQ(a["top_logprobs"].size(), 2u);
  EXPECT_EQ(a["top_logprobs"][1]["token"], "t2");
  EXPECT_EQ(a["top_logprobs"][1]["bytes"], json::array({'t', '2'}));
  // A partial UTF-8 byte keeps its exact bytes; -inf becomes -9999.
  EXPECT_EQ(j["content"][1]["bytes"], json::array({0xE2}));
  EXPECT_EQ(j["content"][1]["logprob"], -9999.0);
  EXPECT_NO_THROW(dump(j));
}

TEST(OpenAiChoicesShapes, CompletionLogprobsOffsetsAndAppend) {
  size_t offset = 3;
  const std::vector<TokenLogprob> first = {{1, -0.25f, {{2, -0.1f}}}};
  const std::vector<TokenLogprob> second = {{12, -1.0f, {}}};
  json all = nullptr;
  append_logprobs(all, completion_logprobs(first, kText, offset));
  append_logprobs(all, completion_logprobs(second, kText, offset));
  EXPECT_EQ(all["tokens"], json::array({"t1", "t12"}));
  EXPECT_EQ(all["token_logprobs"], json::array({-0.25, -1.0}));
  EXPECT_EQ(all["text_offset"], json::array({3, 5}));
  EXPECT_EQ(offset, 8u);
  // The sampled token is listed with the alternatives.
  EXPECT_EQ(all["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(all["top_logprobs"][0]["t1"], -0.25);
  EXPECT_EQ(all["top_logprobs"][1].size(), 1u);
}

TEST(OpenAiChoicesShapes, BodyAndChunksCarryIndexAndSummedUsage) {
  ResponseMeta m{"chatcmpl-x", 1, "tern", GenerationRequest::Kind::Chat};
  std::vector<ChoiceResult> r(3);
  for (int i = 0; i < 3; ++i) {
    r[size_t(i)].text = "c" + std::to_string(i);
    r[size_t(i)].finish.usage = {10, i + 1, 4};
  }
  r[2].finish.reason = sched::FinishReason::Length;
  const json b = choices_body(m, r);
  ASSERT_EQ(b["choices"].size(), 3u);
  EXPECT_EQ(b["choices"][2]["index"], 2);
  EXPECT_EQ(b["choices"][2]["message"]["content"], "c2");
  EXPECT_EQ(b["choices"][2]["finish_reason"], "length");
  EXPECT_TRUE(b["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(b["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(b["usage"]["completion_tokens"], 6);
  EXPECT_EQ(b["usage"]["total_tokens"], 16);
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"], 4);

  const json t = choice_text_chunk(m, 2, "x", nullptr, true);
  EXPECT_EQ(t["object"], "chat.completion.chunk");
  EXPECT_EQ(t["choices"][0]["index"], 2);
  EXPECT_EQ(t["choices"][0]["delta"]["content"], "x");
  EXPECT_TRUE(t["usage"].is_null());
  const json f = choice_finish_chunk(m, 1, r[1].finish, false);
  EXPECT_EQ(f["choices"][0]["index"], 1);
  EXPECT_EQ(f["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(f["choices"][0]["delta"], json::object());
  EXPECT_EQ(choice_role_chunk(m, 1, false)["choices"][0]["delta"]["role"], "assistant");
  std::vector<sched::Finish> fs;
  for (auto& c : r) fs.push_back(c.finish);
  const json u = choices_usage_chunk(m, fs);
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["completion_tokens"], 6);

  ResponseMeta c{"cmpl-x", 1, "tern", GenerationRequest::Kind::Completion};
  const json ct = choice_text_chunk(c, 1, "y", json{{"tokens", json::array()}}, false);
  EXPECT_EQ(ct["object"], "text_completion");
  EXPECT_EQ(ct["choices"][0]["text"], "y");
  EXPECT_TRUE(ct["choices"][0]["logprobs"].is_object());
  EXPECT_EQ(choices_body(c, r)["choices"][1]["text"], "c1");
}

}  // namespace
}  // namespace tern::server
