// Tool calls: the output parser, and forced calls decoded under the framed
// grammar (<tool_call> + anyOf over the tools' schemas).
#include "tern/sampling/tool_calls.h"

#include <gtest/gtest.h>

#include <random>

#include "json_test_util.h"
#include "sampling_test_util.h"
#include "tern/sampling/json_constraint.h"
#include "tern/sampling/json_schema.h"
#include "tern/sampling/sampler.h"

namespace tern {
namespace {

using test::json;

// Feeds `text` in pieces of `step` bytes and flushes; returns content, calls
// and (with stream_arguments) the deltas, in order.
ToolCallParser::Parts parse_in_pieces(const ToolCallSyntax& syn, const std::string& text,
                                      size_t step, bool stream_arguments = false) {
  ToolCallParser p(syn, stream_arguments);
  ToolCallParser::Parts all;
  auto take = [&](ToolCallParser::Parts x) {
    all.content += x.content;
    for (auto& c : x.calls) all.calls.push_back(std::move(c));
    for (auto& d : x.deltas) all.deltas.push_back(std::move(d));
  };
  for (size_t i = 0; i < text.size(); i += step) take(p.push(text.substr(i, step)));
  take(p.flush());
  return all;
}

TEST(ToolCallParser, SplitsContentAndCallsWhateverThePieces) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2}}"
      "\n</tool_call>";
  for (size_t step = 1; step <= text.size(); ++step) {
    const auto parts = parse_in_pieces(ToolCallSyntax{}, text, step);
    EXPECT_EQ(parts.content, "Let me check.\n") << step;
    ASSERT_EQ(parts.calls.size(), 2u) << step;
    EXPECT_EQ(parts.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(parts.calls[0].arguments), json({{"city", "Paris"}}));
    EXPECT_EQ(parts.calls[1].name, "add");
    EXPECT_EQ(json::parse(parts.calls[1].arguments), json({{"a", 1}, {"b", 2}}));
  }
}

// Streamed: each call's name comes first, then its arguments in fragments
// that join to the whole arguments (never the call's own brace or tag).
TEST(ToolCallParser, StreamsNamesThenArgumentFragments) {
  const std::string text =
      "Hi.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"in\": {\"x\": [1, {}]}}}\n</tool_call>\n<tool_call>\n{\"name\":\"add\","
      "\"arguments\":{}}\n</tool_call>";
  for (size_t step = 1; step <= text.size(); ++step) {
    const auto parts = parse_in_pieces(ToolCallSyntax{}, text, step, /*stream_arguments=*/true);
    const std::string& content = parts.content;
    std::vector<std::pair<std::string, std::string>> calls;  // name, joined fragments
    size_t fragments = 0;
    for (const auto& d : parts.deltas) {
      if (!d.name.empty()) {
        ASSERT_EQ(d.index, calls.size());
        calls.push_back({d.name, ""});
      }
      ASSERT_EQ(d.index + 1, calls.size());
      calls.back().second += d.arguments;
      fragments += !d.arguments.empty();
    }
    EXPECT_EQ(content, "Hi.\n") << step;
    ASSERT_EQ(calls.size(), 2u) << step;
    EXPECT_EQ(calls[0].first, "get_weather");
    EXPECT_EQ(json::parse(calls[0].second),
              json::parse(R"({"city": "Paris", "in": {"x": [1, {}]}})"))
        << step << ": " << calls[0].second;
    EXPECT_EQ(calls[1].first, "add");
    EXPECT_EQ(calls[1].second, "{}") << step;
    if (step == 1) EXPECT_GT(fragments, 10u);  // really in pieces
    EXPECT_EQ(parts.calls.size(), 2u);
  }
}

TEST(ToolCallParser, HoldsBackOnlyWhatMayBeATag) {
  ToolCallParser p(ToolCallSyntax{});
  EXPECT_EQ(p.push("a < b and <tool").content, "a < b and ");
  EXPECT_EQ(p.push("box>").content, "<toolbox>");  // not the tag after all
  EXPECT_EQ(p.push("<tool_c").content, "");
  EXPECT_EQ(p.flush().content, "<tool_c");  // the end: nothing more can come
  EXPECT_EQ(p.calls_seen(), 0u);
}

TEST(ToolCallParser, BadBodiesStayContent) {
  const std::string bad = "<tool_call>not json</tool_call>";
  auto parts = parse_in_pieces(ToolCallSyntax{}, "x" + bad + "y", 3);
  EXPECT_EQ(parts.content, "x" + bad + "y");
  EXPECT_TRUE(parts.calls.empty());
  parts = parse_in_pieces(ToolCallSyntax{}, "<tool_call>{\"arguments\":{}}</tool_call>", 5);
  EXPECT_TRUE(parts.calls.empty());  // no name
  // An unterminated call whose body is whole still counts; a cut one does not.
  parts = parse_in_pieces(ToolCallSyntax{}, "<tool_call>\n{\"name\":\"f\"}", 4);
  ASSERT_EQ(parts.calls.size(), 1u);
  EXPECT_EQ(parts.calls[0].arguments, "{}");
  parts = parse_in_pieces(ToolCallSyntax{}, "<tool_call>\n{\"name\":\"f\",\"argu", 4);
  EXPECT_EQ(parts.content, "<tool_call>\n{\"name\":\"f\",\"argu");
}

TEST(ToolCallParser, BareSyntaxTakesTheWholeReply) {
  const ToolCallSyntax llama{"", "", "parameters"};
  auto parts = parse_in_pieces(llama, " {\"name\": \"f\", \"parameters\": {\"x\": \"a;b\"}}", 2);
  ASSERT_EQ(parts.calls.size(), 1u);
  EXPECT_EQ(json::parse(parts.calls[0].arguments), json({{"x", "a;b"}}));
  EXPECT_EQ(parts.content, "");
  parts =
      parse_in_pieces(llama, R"({"name":"f","parameters":{}}; {"name":"g","parameters":{}})", 7);
  ASSERT_EQ(parts.calls.size(), 2u);
  EXPECT_EQ(parts.calls[1].name, "g");
  parts = parse_in_pieces(llama, "Hello {\"name\": \"f\"}", 3);
  EXPECT_EQ(parts.content, "Hello {\"name\": \"f\"}");
  parts = parse_in_pieces(llama, "{not a call", 3);
  EXPECT_EQ(parts.content, "{not a call");
}

const char* kWeather =
    R"({"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false})";
const char* kAdd =
    R"({"type":"object","properties":{"a":{"type":"integer","minimum":0,"maximum":99},"b":{"type":"number"}},"required":["a","b"],"additionalProperties":false})";

ToolCallSyntax syntax(ToolCallSyntax::Form form, std::string open, std::string close,
                      std::string sep = {}, std::string wrap_open = {},
                      std::string wrap_close = {}) {
  ToolCallSyntax s;
  s.form = form;
  s.open = std::move(open);
  s.close = std::move(close);
  s.name_sep = std::move(sep);
  s.wrap_open = std::move(wrap_open);
  s.wrap_close = std::move(wrap_close);
  return s;
}

// `text` in pieces of every size (streaming the arguments on every other
// one): `content`, then get_weather(city: Paris) and add(a: 1, b: "]}").
void expect_two_calls(const ToolCallSyntax& syn, const std::string& text,
                      const std::string& content) {
  for (size_t step = 1; step <= text.size(); ++step) {
    const ToolCallParser::Parts parts = parse_in_pieces(syn, text, step, step % 2 == 0);
    EXPECT_EQ(parts.content, content) << step;
    ASSERT_EQ(parts.calls.size(), 2u) << step << " content: " << parts.content;
    EXPECT_EQ(parts.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(parts.calls[0].arguments), json({{"city", "Paris"}}));
    EXPECT_EQ(parts.calls[1].name, "add");
    EXPECT_EQ(json::parse(parts.calls[1].arguments), json({{"a", 1}, {"b", "]}"}}));
  }
}

// Mistral Nemo: one JSON list after [TOOL_CALLS], no closing tag.
TEST(ToolCallParser, ListSyntaxWithoutAClosingTag) {
  const ToolCallSyntax nemo = syntax(ToolCallSyntax::Form::List, "[TOOL_CALLS]", "");
  const std::string text =
      "Sure.[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, "
      "\"id\": \"abc123def\"}, {\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": \"]}\"}}]";
  expect_two_calls(nemo, text, "Sure.");
  // Not a list of calls: content, tag included.
  EXPECT_EQ(parse_in_pieces(nemo, "[TOOL_CALLS][1, 2]", 3).content, "[TOOL_CALLS][1, 2]");
}

// Mistral Small 3.2 / Devstral: [TOOL_CALLS]name[ARGS]{...}, repeated.
TEST(ToolCallParser, NamedSyntaxEndsWhereItsJsonEnds) {
  const ToolCallSyntax mistral = syntax(ToolCallSyntax::Form::Named, "[TOOL_CALLS]", "", "[ARGS]");
  const std::string text =
      "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]add[ARGS]{\"a\": 1, "
      "\"b\": \"]}\"}";
  expect_two_calls(mistral, text, "");
  // A name that is not one: content.
  EXPECT_EQ(parse_in_pieces(mistral, "[TOOL_CALLS]two words[ARGS]{}", 4).content,
            "[TOOL_CALLS]two words[ARGS]{}");
}

// DeepSeek V3.1: each call tagged, all of them inside a wrapper that is dropped.
TEST(ToolCallParser, NamedSyntaxInsideAWrapper) {
  const ToolCallSyntax ds =
      syntax(ToolCallSyntax::Form::Named, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
             "<｜tool▁sep｜>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>");
  const std::string text =
      "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": "
      "\"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>add<｜tool▁sep｜>{\"a\": 1, \"b\": "
      "\"]}\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  expect_two_calls(ds, text, "Checking.");
  // The wrapper's start alone, without a call after it, is content.
  EXPECT_EQ(parse_in_pieces(ds, "a <｜tool▁calls▁begin｜> b", 2).content,
            "a <｜tool▁calls▁begin｜> b");
}

ToolCallSyntax xml(std::string open, std::string close, std::string name_sep, std::string key_open,
                   std::string key_close, std::string value_close) {
  ToolCallSyntax s =
      syntax(ToolCallSyntax::Form::Xml, std::move(open), std::move(close), std::move(name_sep));
  s.key_open = std::move(key_open);
  s.key_close = std::move(key_close);
  s.value_close = std::move(value_close);
  return s;
}

// Qwen3-Coder and GLM: the arguments as markup; values as text, or JSON when
// they are numbers (and lists, objects, booleans).
TEST(ToolCallParser, XmlParametersBecomeTheArgumentsObject) {
  const ToolCallSyntax qwen = xml("<tool_call>\n<function=", "</function>\n</tool_call>", ">",
                                  "<parameter=", ">", "</parameter>");
  expect_two_calls(qwen,
                   "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                   "</function>\n</tool_call>\n<tool_call>\n<function=add>\n<parameter=a>\n1\n"
                   "</parameter>\n<parameter=b>\n]}\n</parameter>\n</function>\n</tool_call>",
                   "");
  const ToolCallSyntax glm =
      xml("<tool_call>", "</tool_call>", "", "<arg_key>", "</arg_key><arg_value>", "</arg_value>");
  expect_two_calls(glm,
                   "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>"
                   "</tool_call><tool_call>add<arg_key>a</arg_key><arg_value>1</arg_value>"
                   "<arg_key>b</arg_key><arg_value>]}</arg_value></tool_call>",
                   "");
  // A call with no arguments, and one whose markup breaks off: content.
  const auto none = parse_in_pieces(glm, "<tool_call>now</tool_call>", 3);
  ASSERT_EQ(none.calls.size(), 1u);
  EXPECT_EQ(none.calls[0].name, "now");
  EXPECT_EQ(none.calls[0].arguments, "{}");
  EXPECT_EQ(parse_in_pieces(glm, "<tool_call>f<arg_key>x</tool_call>", 5).content,
            "<tool_call>f<arg_key>x</tool_call>");
}

TEST(ToolCallSchema, NameIsOneOfTheToolsAndArgumentsFollowItsSchema) {
  const std::vector<ToolSpec> tools = {{"get_weather", "", kWeather}, {"add", "", kAdd}};
  const auto g = JsonGrammar::from_schema(tool_call_schema(tools, "arguments"));
  auto ok = [&](const std::string& s) {
    JsonMatcher m(g);
    return m.advance(s) && m.accepts_end();
  };
  EXPECT_TRUE(ok(R"({"name":"add","arguments":{"a":1,"b":2.5}})"));
  EXPECT_TRUE(ok(R"({"name":"get_weather","arguments":{"city":"Oslo","unit":"c"}})"));
  EXPECT_FALSE(ok(R"({"name":"add","arguments":{"city":"Oslo","unit":"c"}})"));
  EXPECT_FALSE(ok(R"({"name":"sub","arguments":{"a":1,"b":2}})"));
  EXPECT_FALSE(ok(R"({"arguments":{"a":1,"b":2},"name":"add"})"));  // name first
  EXPECT_THROW(tool_call_schema(std::vector<ToolSpec>{{"f", "", "{not json"}}, "arguments"),
               SchemaError);
}

// Sampling at temperature 1 with no filters, constrained to a tagged call of `tools`.
SamplingParams call_params(const std::vector<ToolSpec>& tools, uint64_t seed) {
  const ToolCallSyntax syn;
  SamplingParams p = test::plain_params(seed);
  p.response_format = ResponseFormat::JsonSchema;
  p.json_schema = tool_call_schema(tools, "arguments");
  p.json_open = syn.frame_open();
  p.json_close = syn.frame_close();
  return p;
}

// Forced calls: random logits (and a model that would rather stop at once)
// still give calls that parse, name a tool and validate against its schema.
TEST(ToolCallConstraint, RandomModelsStillWriteValidCalls) {
  auto vocab = test::test_vocab();
  for (const char* s : {"<tool_call>", "</tool_call>", "<tool", "_call>", "\n<", ">\n{\""})
    vocab.insert(vocab.end() - 1, s);
  const int32_t eos = int32_t(vocab.size()) - 1;
  auto trie = std::make_shared<const TokenTrie>(vocab);
  const std::vector<ToolSpec> tools = {{"get_weather", "", kWeather}, {"add", "", kAdd}};
  const ToolCallSyntax syn;
  for (bool repeat : {false, true}) {
    for (uint64_t seed = 0; seed < 12; ++seed) {
      SamplingParams p = call_params(tools, seed);
      p.json_repeat = repeat;
      Sampler s(p, int32_t(vocab.size()));
      s.constrain(JsonConstraint::from_params(p, trie, {eos}));
      std::mt19937_64 rng(seed);
      std::string out;
      bool ended = false;
      for (int step = 0; step < 400 && !ended; ++step) {
        std::vector<float> logits(vocab.size());
        for (auto& l : logits) l = float(rng() % 1000) / 200.0f;
        // Odd seeds: a model that would rather stop at once; with repeat, one that
        // may stop (else random logits would go on calling forever).
        logits[size_t(eos)] = seed % 2 ? 20.0f : repeat ? 6.0f : 0.0f;
        const int32_t t = s.sample(logits);
        s.accept(t, true);
        if (t == eos)
          ended = true;
        else
          out += vocab[size_t(t)];
      }
      ASSERT_TRUE(ended) << out;
      EXPECT_TRUE(s.constraint()->complete()) << out;
      ASSERT_TRUE(out.starts_with("<tool_call>\n{")) << out;
      const auto parts = parse_in_pieces(syn, out, 1);
      EXPECT_EQ(parts.content, "") << out;
      ASSERT_GE(parts.calls.size(), 1u) << out;
      if (!repeat) EXPECT_EQ(parts.calls.size(), 1u) << out;
      for (const auto& c : parts.calls) {
        const json schema = json::parse(c.name == "add" ? kAdd : kWeather);
        ASSERT_TRUE(c.name == "add" || c.name == "get_weather") << out;
        EXPECT_TRUE(test::validates(json::parse(c.arguments), schema, schema)) << out;
      }
    }
  }
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// Strict tools under tool_choice auto: free text until the model opens a call,
// then the call is constrained, then free again.
TEST(ToolCallConstraint, LazyFrameConstrainsOnlyOnceTheCallOpens) {
  auto vocab = test::test_vocab();
  for (const char* s : {"<tool_call>", "</tool_call>", "Sure", "<tool", "_call>"})
    vocab.insert(vocab.end() - 1, s);
  const int32_t eos = int32_t(vocab.size()) - 1;
  auto id_of = [&](const std::string& s) {
    const auto it = std::find(vocab.begin(), vocab.end(), s);
    EXPECT_NE(it, vocab.end()) << s;
    return int32_t(it - vocab.begin());
  };
  auto trie = std::make_shared<const TokenTrie>(vocab);
  const std::vector<ToolSpec> tools = {{"add", "", kAdd, true}};
  const ToolCallSyntax syn;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    SamplingParams p = call_params(tools, seed);
    p.json_trigger = syn.open;
    Sampler s(p, int32_t(vocab.size()));
    s.constrain(JsonConstraint::from_params(p, trie, {eos}));
    std::mt19937_64 rng(seed);
    // The model's plan: "Sure" then "<tool" "_call>" (the trigger split), then whatever.
    const std::vector<int32_t> plan = {id_of("Sure"), id_of("<tool"), id_of("_call>")};
    std::string out;
    for (int step = 0; step < 400; ++step) {
      std::vector<float> logits(vocab.size());
      for (auto& l : logits) l = float(rng() % 1000) / 200.0f;
      if (size_t(step) < plan.size()) logits[size_t(plan[size_t(step)])] = 100.0f;
      // Free text: nothing is masked (a random pick may even end the reply).
      if (step == 0) {
        std::vector<float> copy = logits;
        JsonConstraint c(JsonGrammar::from_schema(p.json_schema), trie, {eos},
                         JsonFrame{p.json_open, p.json_close, false, p.json_trigger});
        c.mask(copy);
        EXPECT_EQ(copy, logits);
      }
      logits[size_t(eos)] = s.constraint()->complete() ? 30.0f : 0.0f;  // stop when allowed to
      const int32_t t = s.sample(logits);
      s.accept(t, true);
      if (t == eos) break;
      out += vocab[size_t(t)];
    }
    ASSERT_TRUE(out.starts_with("Sure<tool_call>\n{\"name\":\"add\"")) << out;
    const auto parts = parse_in_pieces(syn, out, 1);
    ASSERT_EQ(parts.calls.size(), 1u) << out;
    const json schema = json::parse(kAdd);
    EXPECT_TRUE(test::validates(json::parse(parts.calls[0].arguments), schema, schema)) << out;
    EXPECT_TRUE(s.constraint()->complete()) << out;
  }
}

}  // namespace
}  // namespace tern
