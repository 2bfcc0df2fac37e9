#include "tern/server/anthropic_messages.h"

#include <gtest/gtest.h>

namespace tern::server {
namespace {

using json = nlohmann::json;

json request(json extra = json::object()) {
  json j = {{"model", "m"},
            {"max_tokens", 16},
            {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

ApiError error_of(const json& body) {
  try {
    parse_anthropic_request(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body.dump();
  return ApiError(0, "", "");
}

TEST(AnthropicMessages, ParsesIntoAChatRequest) {
  json body = request({{"system", json::array({{{"type", "text"}, {"text", "be brief"}}})},
                       {"stop_sequences", {"END"}},
                       {"temperature", 0.5},
                       {"top_k", 5},
                       {"stream", true},
                       {"metadata", {{"user_id", "u"}}}});
  body["messages"] = json::array(
      {{{"role", "user"}, {"content", "a"}},
       {{"role", "assistant"}, {"content", json::array({{{"type", "text"}, {"text", "b"}}})}},
       {{"role", "user"}, {"content", "c"}}});
  const auto r = parse_anthropic_request(body);
  EXPECT_EQ(r.kind, GenerationRequest::Kind::Chat);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "be brief");
  EXPECT_EQ(r.messages[2].content, "b");
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(r.params.temperature, 0.5f);
  EXPECT_EQ(r.params.top_k, 5);
  EXPECT_TRUE(r.stream);
}

TEST(AnthropicMessages, Refusals) {
  json no_max = request();
  no_max.erase("max_tokens");
  EXPECT_EQ(error_of(no_max).param(), "max_tokens");
  EXPECT_EQ(error_of(request({{"temperature", 1.5}})).param(), "temperature");
  // Custom tools are accepted; server tools (a typed entry) and unknown tool_choice names are not.
  EXPECT_NO_THROW(parse_anthropic_request(request({{"tools", json::array({{{"name", "f"}}})}})));
  EXPECT_EQ(error_of(request({{"tools", json::array({{{"type", "bash_20250124"}}})}})).param(),
            "tools[0].type");
  EXPECT_EQ(error_of(request({{"tools", json::array({{{"name", "f"}}})},
                              {"tool_choice", {{"type", "tool"}, {"name", "g"}}}}))
                .param(),
            "tool_choice.function.name");
  EXPECT_EQ(error_of(request({{"thinking", {{"type", "enabled"}}}})).param(), "thinking");
  json prefill = request();
  prefill["messages"].push_back({{"role", "assistant"}, {"content", "Sure"}});
  EXPECT_EQ(error_of(prefill).param(), "messages");
  json image = request();
  image["messages"][0]["content"] = json::array({{{"type", "image"}}});
  EXPECT_EQ(error_of(image).code(), "unsupported_value");
  // Unknown fields: ignored, or refused when strict.
  EXPECT_NO_THROW(parse_anthropic_request(request({{"container", "c"}})));
  EXPECT_THROW(parse_anthropic_request(request({{"container", "c"}}), UnknownFields::Refuse),
               ApiError);
}

TEST(AnthropicMessages, Bodies) {
  sched::Finish f;
  f.reason = sched::FinishReason::Length;
  f.usage = {10, 4, 6};
  const json m = anthropic_message("msg_1", "model", "hello", f);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["content"][0]["text"], "hello");
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  EXPECT_EQ(m["usage"]["input_tokens"], 4);
  EXPECT_EQ(m["usage"]["cache_read_input_tokens"], 6);
  EXPECT_EQ(m["usage"]["output_tokens"], 4);
  const json e = anthropic_error_body(ApiError::bad_request("bad"));
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["message"], "bad");
  EXPECT_EQ(anthropic_error_body(ApiError(401, "x", "k"))["error"]["type"], "authentication_error");
}

}  // namespace
}  // namespace tern::server
