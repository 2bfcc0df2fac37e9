// Every corpus template whose call format tern reads off it: the template's
// own rendering of an assistant turn with two calls, parsed back by the
// ToolCallParser in that format, gives the two calls (name and arguments).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "../../../src/server/generation.h"
#include "tern/core/error.h"
#include "tern/sampling/tool_calls.h"
#include "tern/tokenizer/chat_template.h"
#include "testutil.h"

namespace tern::server {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

TEST(ToolFormats, EachTemplatesOwnCallsParseBack) {
  const ChatTokens tokens{"<s>", "</s>", false, false};
  const fs::path dir = test::fixture_path("templates");
  int checked = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".jinja") continue;
    const ChatTemplate t = ChatTemplate::from_jinja(test::read_file(e.path().string()), tokens);
    if (!t.tool_format_is_the_templates()) continue;
    SCOPED_TRACE(e.path().filename().string());
    const std::vector<ChatMessage> said = {{"user", "Go."}, {"assistant", "TEXT_MARK"}};
    std::vector<ChatMessage> called = {{"user", "Go."}, {"assistant", ""}};
    called[1].tool_calls = {{"get_weather", R"({"city": "Oslo", "unit": "c"})", "call00001"},
                            {"add", R"({"a": 1, "b": [2, 3]})", "call00002"}};
    const std::string a = t.apply(said, false);
    std::string b;
    try {
      b = t.apply(called, false);
    } catch (const InvalidArgument&) {  // "only supports single tool-calls"
      called[1].tool_calls.pop_back();
      b = t.apply(called, false);
    }
    const size_t at = a.find("TEXT_MARK");
    ASSERT_NE(at, std::string::npos);
    size_t head = 0;
    while (head < at && head < b.size() && a[head] == b[head]) ++head;
    const std::string_view turn_end = std::string_view(a).substr(at + 9);
    ASSERT_TRUE(std::string_view(b).ends_with(turn_end));
    const std::string written = b.substr(head, b.size() - head - turn_end.size());
    ToolCallParser p(call_syntax(t.tool_format()));
    ToolCallParser::Parts parts = p.push(written);
    ToolCallParser::Parts rest = p.flush();
    parts.content += rest.content;
    for (auto& c : rest.calls) parts.calls.push_back(std::move(c));
    ASSERT_GE(parts.calls.size(), 1u) << written;
    EXPECT_EQ(parts.calls[0].name, "get_weather") << written;
    EXPECT_EQ(json::parse(parts.calls[0].arguments), json({{"city", "Oslo"}, {"unit", "c"}}))
        << written;
    if (written.find("add") != std::string::npos) {
      ASSERT_EQ(parts.calls.size(), 2u) << written;
      EXPECT_EQ(parts.calls[1].name, "add");
      EXPECT_EQ(json::parse(parts.calls[1].arguments), json({{"a", 1}, {"b", {2, 3}}})) << written;
    }
    EXPECT_EQ(parts.content.find("get_weather"), std::string::npos) << parts.content;
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

}  // namespace
}  // namespace tern::server
