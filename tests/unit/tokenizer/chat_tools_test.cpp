// Tool sections of the chat templates: the texts Qwen 2.5's and Llama 3.2's
// Jinja templates write (models/templates in llama.cpp), and the generic
// fallback for templates without one.
#include <gtest/gtest.h>

#include "tern/tokenizer/chat_template.h"

namespace tern {
namespace {

const std::vector<ChatTool> kTools = {
    {"get_weather", "Weather of a city",
     R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"}};

std::vector<ChatMessage> conversation() {
  std::vector<ChatMessage> m;
  m.push_back({"user", "Weather in Paris?", {}});
  m.push_back({"assistant", "", {{"get_weather", R"({"city":"Paris"})"}}});
  m.push_back({"tool", "18C, sunny", {}});
  m.push_back({"tool", "wind 5 km/h", {}});
  return m;
}

TEST(ChatTools, ChatMLWritesQwen25sHermesSection) {
  const ChatTemplate t = ChatTemplate::of_kind(ChatTemplate::Kind::ChatML, "You are SmolLM.");
  const std::string want =
      "<|im_start|>system\nYou are SmolLM.\n\n# Tools\n\nYou may call one or more functions to "
      "assist with the user query.\n\nYou are provided with function signatures within "
      "<tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
      "\"get_weather\", \"description\": \"Weather of a city\", \"parameters\": {\"type\": "
      "\"object\", "
      "\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n"
      "</tools>\n\nFor each function call, return a json object with function name and arguments "
      "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
      "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n18C, sunny\n</tool_response>\n<tool_response>\nwind 5 "
      "km/h\n</tool_response><|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(t.apply(conversation(), true, kTools), want);
  EXPECT_EQ(t.tool_format().open, "<tool_call>");
}

TEST(ChatTools, Llama3WritesItsJsonForm) {
  const ChatTemplate t = ChatTemplate::of_kind(ChatTemplate::Kind::Llama3);
  const std::string out = t.apply(conversation(), true, kTools);
  EXPECT_NE(out.find("<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions"),
            std::string::npos);
  EXPECT_NE(out.find("{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": "
                     "\"get_weather\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", "
                     "\"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("<|start_header_id|>ipython<|end_header_id|>\n\n18C, sunny<|eot_id|>"),
            std::string::npos);
  EXPECT_EQ(t.tool_format().args_key, "parameters");
  EXPECT_EQ(t.tool_format().open, "");
}

TEST(ChatTools, GemmaUsesTheGenericFallback) {
  const ChatTemplate t = ChatTemplate::of_kind(ChatTemplate::Kind::Gemma);
  const std::string out = t.apply(conversation(), true, kTools);
  EXPECT_TRUE(out.starts_with("<start_of_turn>user\n# Tools\n\nYou may call")) << out;
  EXPECT_NE(out.find("<start_of_turn>model\n<tool_call>\n{\"name\": \"get_weather\", "
                     "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call><end_of_turn>"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("<start_of_turn>user\n<tool_response>\n18C, sunny\n</tool_response>\n"
                     "<tool_response>\nwind 5 km/h\n</tool_response><end_of_turn>"),
            std::string::npos)
      << out;
  EXPECT_EQ(t.tool_format().open, "<tool_call>");
}

// Found by fuzz_chat_template: a call's name that is not UTF-8 made nlohmann's
// dump throw type_error out of apply(); the bytes now become U+FFFD.
TEST(ChatTools, CallNameWithInvalidUtf8IsReplacedNotThrown) {
  std::vector<ChatMessage> m;
  m.push_back({"user", "Hi", {}});
  m.push_back({"assistant", "", {{"get_w\x9b\xa7ther", R"({"city":"Oslo"})"}}});
  for (auto kind : {ChatTemplate::Kind::ChatML, ChatTemplate::Kind::Llama3,
                    ChatTemplate::Kind::Gemma, ChatTemplate::Kind::Llama2}) {
    const ChatTemplate t = ChatTemplate::of_kind(kind);
    std::string text;
    ASSERT_NO_THROW(text = t.apply(m, true, kTools)) << t.name();
    EXPECT_NE(text.find("get_w\xef\xbf\xbd"), std::string::npos) << t.name();
  }
}

}  // namespace
}  // namespace tern
