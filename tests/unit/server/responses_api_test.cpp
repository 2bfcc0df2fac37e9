#include "tern/server/responses_api.h"

#include <gtest/gtest.h>

#include "tern/server/response_store.h"

namespace tern::server {
namespace {

using json = nlohmann::json;

std::optional<std::vector<Message>> none(const std::string&) {
  return std::nullopt;
}

ApiError error_of(const json& body, const ResponseLookup& lookup = none) {
  try {
    parse_responses_request(body, lookup);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body.dump();
  return ApiError(0, "", "");
}

TEST(ResponsesApi, InputStringAndItems) {
  auto r = parse_responses_request(json{{"input", "hi"}, {"max_output_tokens", 5}}, none);
  ASSERT_EQ(r.g.messages.size(), 1u);
  EXPECT_EQ(r.g.messages[0].role, "user");
  EXPECT_EQ(r.g.params.max_tokens, 5);
  EXPECT_TRUE(r.store);
  const json items =
      json::array({{{"role", "developer"}, {"content", "be brief"}},
                   {{"type", "message"},
                    {"role", "user"},
                    {"content", json::array({{{"type", "input_text"}, {"text", "a"}}})}},
                   {{"role", "assistant"},
                    {"content", json::array({{{"type", "output_text"}, {"text", "b"}}})}}});
  r = parse_responses_request(json{{"input", items}, {"instructions", "sys"}, {"store", false}},
                              none);
  ASSERT_EQ(r.g.messages.size(), 4u);
  EXPECT_EQ(r.g.messages[0].content, "sys");  // instructions: this turn only
  EXPECT_EQ(r.g.messages[1].role, "system");
  EXPECT_EQ(r.g.messages[3].content, "b");
  EXPECT_EQ(r.conversation.size(), 3u);
  EXPECT_FALSE(r.store);
}

TEST(ResponsesApi, ContinuesAStoredConversation) {
  auto lookup = [](const std::string& id) -> std::optional<std::vector<Message>> {
    if (id != "resp_1") return std::nullopt;
    return std::vector<Message>{{"user", "q1"}, {"assistant", "a1"}};
  };
  const auto r =
      parse_responses_request(json{{"input", "q2"}, {"previous_response_id", "resp_1"}}, lookup);
  ASSERT_EQ(r.g.messages.size(), 3u);
  EXPECT_EQ(r.g.messages[1].content, "a1");
  EXPECT_EQ(r.echo["previous_response_id"], "resp_1");
  const auto e = error_of(json{{"input", "q"}, {"previous_response_id", "resp_2"}}, lookup);
  EXPECT_EQ(e.status(), 404);
  EXPECT_EQ(e.param(), "previous_response_id");
}

TEST(ResponsesApi, Refusals) {
  EXPECT_EQ(error_of(json::object()).param(), "input");
  EXPECT_EQ(
      error_of(json{{"input", "x"}, {"tools", json::array({{{"type", "function"}}})}}).param(),
      "tools[0].function.name");
  EXPECT_EQ(
      error_of(json{{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}}}}}}).param(),
      "text.format");
  // A function_call_output needs the call it answers; other item types are refused.
  EXPECT_EQ(error_of(json{{"input", json::array({{{"type", "function_call_output"}}})}}).param(),
            "input[0].call_id");
  EXPECT_EQ(error_of(json{{"input", json::array({{{"type", "item_reference"}}})}}).param(),
            "input[0].type");
  EXPECT_EQ(error_of(json{{"input", "x"}, {"max_output_tokens", 0}}).param(), "max_output_tokens");
  EXPECT_NO_THROW(parse_responses_request(
      json{{"input", "x"}, {"text", {{"format", {{"type", "text"}}}}}, {"reasoning_x", 1}}, none));
}

TEST(ResponsesApi, ObjectAndUsage) {
  ResponsesMeta m{"resp_1", "msg_1", 7, "model", json{{"store", true}}, ""};
  EXPECT_EQ(responses_object(m, "", nullptr)["status"], "in_progress");
  sched::Finish f;
  f.reason = sched::FinishReason::Length;
  f.usage = {10, 3, 8};
  const json j = responses_object(m, "hey", &f);
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "hey");
  EXPECT_EQ(j["usage"]["input_tokens_details"]["cached_tokens"], 8);
  EXPECT_EQ(j["usage"]["total_tokens"], 13);
  EXPECT_TRUE(j.contains("timings"));
}

TEST(ResponseStore, BoundedInCountAndAge) {
  ResponseStore store(2, std::chrono::hours(1));
  store.put("a", {{"user", "1"}});
  store.put("b", {{"user", "2"}});
  store.put("c", {{"user", "3"}});
  EXPECT_FALSE(store.get("a"));
  EXPECT_EQ(store.get("c")->at(0).content, "3");
  EXPECT_EQ(store.size(), 2u);
  ResponseStore brief(8, std::chrono::milliseconds(0));
  brief.put("x", {{"user", "1"}});
  EXPECT_FALSE(brief.get("x"));
}

}  // namespace
}  // namespace tern::server
