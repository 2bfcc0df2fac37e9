#include "tern/server/openai_request.h"

#include <gtest/gtest.h>

namespace tern::server {
namespace {

using json = nlohmann::json;

json chat(json extra = json::object()) {
  json j = {{"model", "m"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

// The ApiError a parse throws (fails the test if none).
ApiError chat_error(const json& body) {
  try {
    parse_chat_request(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body.dump();
  return ApiError(0, "", "");
}

ApiError completion_error(const json& body) {
  try {
    parse_completion_request(body);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body.dump();
  return ApiError(0, "", "");
}

TEST(OpenAiRequest, MalformedJsonIs400) {
  for (const char* body : {"", "{", "{\"a\":}", "[1,2]", "42", "\"text\"", "null"}) {
    try {
      parse_json_body(body);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << body;
      EXPECT_EQ(e.code(), "invalid_json") << body;
    }
  }
  EXPECT_TRUE(parse_json_body("{\"a\": 1}").is_object());
}

TEST(OpenAiRequest, ChatDefaultsAndFields) {
  const auto r = parse_chat_request(chat({{"max_tokens", 7},
                                          {"temperature", 0},
                                          {"top_p", 0.5},
                                          {"seed", 42},
                                          {"stop", "END"},
                                          {"presence_penalty", 0.5},
                                          {"frequency_penalty", -0.5},
                                          {"stream", true},
                                          {"stream_options", {{"include_usage", true}}}}));
  EXPECT_EQ(r.kind, GenerationRequest::Kind::Chat);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "hi");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_EQ(r.params.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.5f);
  EXPECT_EQ(r.params.seed, 42u);
  ASSERT_EQ(r.params.stop.size(), 1u);
  EXPECT_EQ(r.params.stop[0], "END");
  EXPECT_FLOAT_EQ(r.params.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.params.frequency_penalty, -0.5f);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);

  const auto d = parse_chat_request(chat());
  EXPECT_EQ(d.params.max_tokens, -1);
  EXPECT_FALSE(d.max_tokens_given);
  EXPECT_FALSE(d.stream);
}

TEST(OpenAiRequest, MaxCompletionTokensAndContentParts) {
  json body = chat({{"max_completion_tokens", 5}});
  body["messages"] = json::array({{{"role", "developer"}, {"content", "be brief"}},
                                  {{"role", "user"},
                                   {"content", json::array({{{"type", "text"}, {"text", "a"}},
                                                            {{"type", "text"}, {"text", "b"}}})}},
                                  {{"role", "assistant"}, {"content", nullptr}}});
  const auto r = parse_chat_request(body);
  EXPECT_EQ(r.params.max_tokens, 5);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "developer");  // the chat template reads it (as system, mostly)
  EXPECT_EQ(r.messages[1].content, "a\nb");
  EXPECT_EQ(r.messages[2].content, "");
}

TEST(OpenAiRequest, WrongTypesNameTheField) {
  struct Case {
    const char* key;
    json value;
  };
  const Case cases[] = {{"temperature", "hot"}, {"max_tokens", 1.5},   {"top_p", true},
                        {"stream", "yes"},      {"stop", 5},           {"seed", "x"},
                        {"messages", "hi"},     {"stream_options", 1}, {"model", 3}};
  for (const auto& c : cases) {
    const auto e = chat_error(chat({{c.key, c.value}}));
    EXPECT_EQ(e.status(), 400) << c.key;
    EXPECT_EQ(e.param(), c.key);
    EXPECT_EQ(e.code(), "invalid_type") << c.key;
    EXPECT_NE(std::string(e.what()).find(c.key), std::string::npos) << e.what();
  }
}

TEST(OpenAiRequest, OutOfRangeValues) {
  const std::pair<const char*, json> cases[] = {
      {"temperature", 2.5},        {"temperature", -1}, {"top_p", 1.5},
      {"max_tokens", 0},           {"max_tokens", -3},  {"presence_penalty", 3},
      {"frequency_penalty", -2.1}, {"min_p", 2},        {"top_k", -1},
      {"repeat_penalty", 0}};
  for (const auto& [key, value] : cases) {
    const auto e = chat_error(chat({{key, value}}));
    EXPECT_EQ(e.status(), 400) << key;
    EXPECT_EQ(e.param(), key) << key << " " << e.what();
    EXPECT_EQ(e.code(), "invalid_value") << key;
  }
}

TEST(OpenAiRequest, UnknownFieldsAreIgnoredUnlessStrict) {
  // Fields newer SDKs send, at the top level and nested: ignored by default.
  const json body =
      chat({{"reasoning_effort", "low"},
            {"frobnicate", 1},
            {"stream_options", {{"include_usage", true}, {"include_obfuscation", false}}}});
  json with_message_extra = chat();
  with_message_extra["messages"][0]["annotations"] = json::array();
  EXPECT_NO_THROW(parse_chat_request(body));
  EXPECT_NO_THROW(parse_chat_request(with_message_extra));
  EXPECT_NO_THROW(parse_completion_request(json{{"prompt", "x"}, {"frobnicate", 1}}));
  // Known harmless fields pass even when strict.
  EXPECT_NO_THROW(parse_chat_request(chat({{"metadata", {{"k", "v"}}},
                                           {"store", false},
                                           {"service_tier", "auto"},
                                           {"parallel_tool_calls", true},
                                           {"user", "u"}}),
                                     {}, UnknownFields::Refuse));
  // --strict-fields: a 400 naming the field.
  auto strict_error = [](const json& b) {
    try {
      parse_chat_request(b, {}, UnknownFields::Refuse);
    } catch (const ApiError& e) {
      return e;
    }
    ADD_FAILURE() << "no error for " << b.dump();
    return ApiError(0, "", "");
  };
  auto e = strict_error(chat({{"frobnicate", 1}}));
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "unknown_parameter");
  EXPECT_EQ(e.param(), "frobnicate");
  EXPECT_EQ(strict_error(chat({{"stream_options", {{"include_obfuscation", true}}}})).param(),
            "stream_options.include_obfuscation");
  EXPECT_EQ(strict_error(with_message_extra).param(), "messages[].annotations");
  // Warned about once per name, process-wide.
  EXPECT_FALSE(note_unknown_field("frobnicate"));
  EXPECT_TRUE(note_unknown_field("a-name-nobody-sent"));
  EXPECT_FALSE(note_unknown_field("a-name-nobody-sent"));
}

TEST(OpenAiRequest, UnsupportedFields) {
  EXPECT_EQ(chat_error(chat({{"n", 0}})).param(), "n");
  EXPECT_EQ(chat_error(chat({{"n", kMaxChoices + 1}})).param(), "n");
  EXPECT_EQ(chat_error(chat({{"top_logprobs", 2}})).param(), "top_logprobs");
  EXPECT_EQ(chat_error(chat({{"tools", json::array({{{"type", "function"}}})}})).param(),
            "tools[0].function");
  EXPECT_EQ(chat_error(chat({{"response_format", {{"type", "xml"}}}})).param(),
            "response_format.type");
  // Neutral values of unsupported features, and harmless extras, pass.
  EXPECT_NO_THROW(parse_chat_request(chat({{"n", 1},
                                           {"logprobs", false},
                                           {"user", "u"},
                                           {"tools", json::array()},
                                           {"response_format", {{"type", "text"}}},
                                           {"logit_bias", json::object()},
                                           {"temperature", nullptr}})));
  // Callers may own extra keys (the WebSocket's "type" and "id").
  EXPECT_NO_THROW(parse_chat_request(chat({{"type", "generate"}, {"id", "a"}}), {"type", "id"}));
}

TEST(OpenAiRequest, ResponseFormat) {
  auto r = parse_chat_request(chat({{"response_format", {{"type", "json_object"}}}}));
  EXPECT_EQ(r.params.response_format, ResponseFormat::JsonObject);
  const json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  const json rf = {{"type", "json_schema"},
                   {"json_schema", {{"name", "s"}, {"schema", schema}, {"strict", true}}}};
  r = parse_chat_request(chat({{"response_format", rf}}));
  EXPECT_EQ(r.params.response_format, ResponseFormat::JsonSchema);
  EXPECT_EQ(json::parse(r.params.json_schema), schema);
  // Completions take it too.
  r = parse_completion_request(json{{"prompt", "x"}, {"response_format", rf}});
  EXPECT_EQ(r.params.response_format, ResponseFormat::JsonSchema);
  // A keyword the grammar cannot enforce: 400 naming it.
  json bad = rf;
  bad["json_schema"]["schema"] = {{"type", "string"}, {"pattern", "^a+$"}};
  auto e = chat_error(chat({{"response_format", bad}}));
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "response_format.json_schema.schema");
  EXPECT_EQ(e.code(), "invalid_json_schema");
  EXPECT_NE(std::string(e.what()).find("'pattern'"), std::string::npos) << e.what();
  bad["json_schema"]["schema"] = "not a schema";
  EXPECT_EQ(chat_error(chat({{"response_format", bad}})).code(), "invalid_type");
  bad["json_schema"].erase("name");
  EXPECT_EQ(chat_error(chat({{"response_format", bad}})).param(),
            "response_format.json_schema.name");
}

TEST(OpenAiRequest, BadMessages) {
  EXPECT_EQ(chat_error(json{{"model", "m"}}).code(), "missing_required_parameter");
  EXPECT_EQ(chat_error(chat({{"messages", json::array()}})).param(), "messages");
  EXPECT_EQ(chat_error(chat({{"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}}))
                .param(),
            "messages[0].role");
  EXPECT_EQ(chat_error(chat({{"messages", json::array({{{"content", "x"}}})}})).param(),
            "messages[0].role");
  EXPECT_EQ(chat_error(chat({{"messages", json::array({{{"role", "user"}}})}})).param(),
            "messages[0].content");
  EXPECT_EQ(
      chat_error(chat({{"messages", json::array({{{"role", "user"}, {"content", 5}}})}})).code(),
      "invalid_type");
  const json image = json::array(
      {{{"role", "user"},
        {"content", json::array({{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}})}}});
  EXPECT_EQ(chat_error(chat({{"messages", image}})).code(), "unsupported_value");
  EXPECT_EQ(chat_error(chat({{"messages", json::array({"hi"})}})).param(), "messages[0]");
}

TEST(OpenAiRequest, TemplateKwargsReasoningEffortAndEarlierReasoning) {
  auto r = parse_chat_request(chat({{"chat_template_kwargs", {{"enable_thinking", false}}}}));
  EXPECT_EQ(r.chat_template_kwargs, nlohmann::ordered_json({{"enable_thinking", false}}));
  r = parse_chat_request(chat({{"reasoning_effort", "high"}}));
  EXPECT_EQ(r.chat_template_kwargs["reasoning_effort"], "high");
  r = parse_chat_request(chat({{"reasoning_effort", "none"}}));
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(parse_chat_request(chat({})).chat_template_kwargs.is_null());
  EXPECT_EQ(chat_error(chat({{"chat_template_kwargs", "x"}})).code(), "invalid_type");
  EXPECT_EQ(chat_error(chat({{"reasoning_effort", "extreme"}})).param(), "reasoning_effort");
  json big = json::object();
  for (int i = 0; i < 65; ++i) big["k" + std::to_string(i)] = i;
  EXPECT_EQ(chat_error(chat({{"chat_template_kwargs", big}})).param(), "chat_template_kwargs");
  const json thought = json::array(
      {{{"role", "user"}, {"content", "2+2?"}},
       {{"role", "assistant"}, {"content", "4"}, {"reasoning_content", "two and two"}}});
  r = parse_chat_request(chat({{"messages", thought}}));
  EXPECT_EQ(r.messages[1].reasoning_content, "two and two");
  json bad = thought;
  bad[0]["reasoning_content"] = "x";
  EXPECT_EQ(chat_error(chat({{"messages", bad}})).param(), "messages[0].reasoning_content");
  bad = thought;
  bad[1]["reasoning_content"] = 5;
  EXPECT_EQ(chat_error(chat({{"messages", bad}})).code(), "invalid_type");
}

TEST(OpenAiRequest, StopStrings) {
  const auto r = parse_chat_request(chat({{"stop", {"a", "bc"}}}));
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(chat_error(chat({{"stop", {""}}})).param(), "stop");
  EXPECT_EQ(chat_error(chat({{"stop", {"a", 1}}})).param(), "stop");
  json many = json::array();
  for (size_t i = 0; i <= kMaxStopStrings; ++i) many.push_back(std::to_string(i) + "s");
  EXPECT_EQ(chat_error(chat({{"stop", many}})).param(), "stop");
}

TEST(OpenAiRequest, TopPZeroMeansGreedy) {
  const auto r = parse_chat_request(chat({{"top_p", 0}}));
  EXPECT_EQ(r.params.top_k, 1);
  EXPECT_NO_THROW(r.params.validate());
}

TEST(OpenAiRequest, Completions) {
  auto r = parse_completion_request(json{{"prompt", "Once upon"}});
  EXPECT_EQ(r.kind, GenerationRequest::Kind::Completion);
  EXPECT_EQ(r.prompt, "Once upon");
  EXPECT_EQ(r.params.max_tokens, kCompletionDefaultMaxTokens);
  r = parse_completion_request(json{{"prompt", {"only"}}, {"max_tokens", 3}, {"echo", true}});
  EXPECT_EQ(r.prompt, "only");
  EXPECT_EQ(r.params.max_tokens, 3);
  EXPECT_TRUE(r.echo);
  r = parse_completion_request(json{{"prompt", {1, 2, 3}}});
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  r = parse_completion_request(json{{"prompt", {{4, 5}}}});
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{4, 5}));

  EXPECT_EQ(completion_error(json::object()).param(), "prompt");
  EXPECT_EQ(completion_error(json{{"prompt", {"a", "b"}}}).code(), "unsupported_value");
  EXPECT_EQ(completion_error(json{{"prompt", json::array()}}).param(), "prompt");
  EXPECT_EQ(completion_error(json{{"prompt", {1, -2}}}).param(), "prompt");
  EXPECT_EQ(completion_error(json{{"prompt", 5}}).code(), "invalid_type");
  // Chat's messages sent to /v1/completions would be silently dropped: refused.
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"messages", json::array()}}).param(),
            "messages");
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"best_of", 3}}).param(), "best_of");
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"suffix", "y"}}).param(), "suffix");
}

}  // namespace
}  // namespace tern::server
