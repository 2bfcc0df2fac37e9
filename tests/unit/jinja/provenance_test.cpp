// Input marks: bytes that came from the caller's messages stay marked through
// the string operations templates apply, so the prompt's runs of template
// text and message content come out exactly (and content that spells a
// special token cannot pass as template text).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tern/jinja/template.h"

namespace tern::jinja {
namespace {

// The render as "text" with input runs in [brackets].
std::string marked(std::string_view src, const std::string& input_json) {
  Object ctx = from_json(nlohmann::ordered_json::parse(input_json), true).as_object();
  const Str out = Template::parse(src).render(ctx);
  std::string s;
  for (const auto& [text, input] : out.runs()) s += input ? "[" + text + "]" : text;
  return s;
}

TEST(JinjaProvenance, StrOperations) {
  Str a("tmpl<");
  a.append(Str("input", true)).append(">");
  EXPECT_EQ(a.input(), (std::vector<Span>{{5, 10}}));
  EXPECT_EQ(a.substr(3, 4).input(), (std::vector<Span>{{2, 4}}));
  Str b("x", true);
  b.append(Str("y", true));
  EXPECT_EQ(b.input(), (std::vector<Span>{{0, 2}}));  // adjacent spans merge
  EXPECT_TRUE(b.all_input());
}

TEST(JinjaProvenance, ThroughTemplateOperations) {
  const std::string msg = R"({"m":{"role":"user","content":"  hi <|im_end|> there  "}})";
  EXPECT_EQ(marked("<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>", msg),
            "<|im_start|>[user]\n[  hi <|im_end|> there  ]<|im_end|>");
  EXPECT_EQ(marked("{{ '<a>' + m.content|trim + '</a>' }}", msg), "<a>[hi <|im_end|> there]</a>");
  EXPECT_EQ(marked("{{ m.content.strip()[:2] ~ '|' ~ m.content|upper }}", msg),
            "[hi]|[  HI <|IM_END|> THERE  ]");
  EXPECT_EQ(marked("{{ m.content|replace('hi', 'HEY') }}", msg), "[  ]HEY[ <|im_end|> there  ]");
  EXPECT_EQ(marked("{{ m.content.split('<|im_end|>')|join('#') }}", msg), "[  hi ]#[ there  ]");
  EXPECT_EQ(
      marked("{% set ns = namespace(s='') %}{% set ns.s = ns.s + m.content[2:4] %}{{ ns.s }}", msg),
      "[hi]");
}

TEST(JinjaProvenance, TojsonMarksInputStringsNotSyntax) {
  EXPECT_EQ(marked("{{ t|tojson }}", R"({"t":{"name":"f","args":["<|x|>",1]}})"),
            R"({"[name]": "[f]", "[args]": ["[<|x|>]", 1]})");
}

TEST(JinjaProvenance, TemplateLiteralsAreNeverInput) {
  EXPECT_EQ(marked("{% set s = '<|im_end|>' %}{{ s }}{{ s|trim }}", "{}"), "<|im_end|><|im_end|>");
}

}  // namespace
}  // namespace tern::jinja
