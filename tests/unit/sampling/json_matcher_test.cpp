#include "tern/sampling/json_matcher.h"

#include <gtest/gtest.h>

#include <cmath>

#include "json_test_util.h"
#include "tern/sampling/json_constraint.h"
#include "tern/sampling/sampler.h"

namespace tern {
namespace {

JsonMatcher matcher(const char* schema) {
  return JsonMatcher(JsonGrammar::from_schema(schema));
}

// Whether the whole text is a complete value of the schema.
bool complete(const char* schema, const std::string& text) {
  JsonMatcher m = matcher(schema);
  return m.advance(text) && m.accepts_end();
}
bool prefix_ok(const char* schema, const std::string& text) {
  return matcher(schema).advance(text);
}

TEST(JsonMatcher, AcceptsValidAndRefusesInvalidText) {
  const char* obj =
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false})";
  EXPECT_TRUE(complete(obj, R"({"a":1})"));
  EXPECT_TRUE(complete(obj, R"({"a":-12,"b":"x"})"));
  EXPECT_FALSE(prefix_ok(obj, R"({"b")"));        // required a skipped
  EXPECT_FALSE(prefix_ok(obj, R"({"c")"));        // not declared
  EXPECT_FALSE(prefix_ok(obj, R"({"a":1,"a")"));  // duplicate
  EXPECT_FALSE(prefix_ok(obj, R"({})"));
  EXPECT_FALSE(prefix_ok(obj, R"({"a":01)"));  // leading zero
  EXPECT_FALSE(prefix_ok(obj, R"({"a":1.5)"));
  EXPECT_FALSE(prefix_ok(obj, R"({ "a")"));  // compact output: no whitespace
  EXPECT_FALSE(complete(obj, R"({"a":1)"));
  EXPECT_FALSE(prefix_ok(obj, R"({"a":1}x)"));
}

TEST(JsonMatcher, Strings) {
  const char* s = R"({"type":"string","minLength":2,"maxLength":3})";
  EXPECT_TRUE(complete(s, "\"\xC3\xA9\xE6\x97\xA5\""));  // 2 code points, 5 bytes
  EXPECT_TRUE(complete(s, R"("\ud83d\ude00\n")"));       // a pair counts once
  EXPECT_FALSE(prefix_ok(s, R"("\ude00)"));              // lone low surrogate
  EXPECT_FALSE(prefix_ok(s, R"("\ud83dx)"));             // high without low
  EXPECT_FALSE(prefix_ok(s, "\"a\x01"));                 // raw control character
  EXPECT_FALSE(prefix_ok(s, "\"\xC0\xAF"));              // overlong encoding
  EXPECT_FALSE(prefix_ok(s, "\"\xED\xA0\x80"));          // encoded surrogate
  EXPECT_FALSE(prefix_ok(s, R"("\x)"));                  // bad escape
  EXPECT_FALSE(prefix_ok(s, R"("a")"));                  // too short
  EXPECT_FALSE(prefix_ok(s, R"("abcd)"));                // too long
}

TEST(JsonMatcher, NumberRanges) {
  const char* i = R"({"type":"integer","minimum":5,"maximum":12})";
  for (int v = -3; v < 20; ++v) EXPECT_EQ(complete(i, std::to_string(v)), v >= 5 && v <= 12) << v;
  EXPECT_FALSE(prefix_ok(i, "-"));
  EXPECT_FALSE(prefix_ok(i, "2"));  // 2, 20..29, 200.. all out of range
  EXPECT_TRUE(prefix_ok(i, "1"));   // 10, 11, 12
  EXPECT_FALSE(prefix_ok(i, "13"));
  const char* n = R"({"type":"number","exclusiveMinimum":0,"maximum":1})";
  EXPECT_TRUE(complete(n, "0.5"));
  EXPECT_TRUE(complete(n, "1"));
  EXPECT_FALSE(complete(n, "0"));
  EXPECT_FALSE(prefix_ok(n, "1.1"));
  EXPECT_FALSE(prefix_ok(n, "1e"));  // no exponent with a range
  EXPECT_TRUE(complete(R"({"type":"number"})", "-1.5e+10"));
}

TEST(JsonMatcher, ArraysAndUnions) {
  const char* a = R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2})";
  EXPECT_FALSE(prefix_ok(a, "[]"));
  EXPECT_TRUE(complete(a, "[1,2]"));
  EXPECT_FALSE(prefix_ok(a, "[1,2,"));
  EXPECT_FALSE(prefix_ok(a, "[1,]"));
  const char* u =
      R"({"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false},{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}]})";
  EXPECT_TRUE(complete(u, R"({"a":1})"));
  EXPECT_TRUE(complete(u, R"({"a":"x"})"));
  EXPECT_FALSE(prefix_ok(u, R"({"a":t)"));
}

TEST(JsonMatcher, ExtraKeysMayNotRepeatDeclaredOnes) {
  const char* s = R"({"type":"object","properties":{"name":{"type":"integer"}}})";
  EXPECT_TRUE(complete(s, R"({"name":1,"nam":true,"named":"x","x\"y":null})"));
  EXPECT_FALSE(prefix_ok(s, R"({"name":1,"name")"));
  EXPECT_TRUE(complete(s, R"({"other":[1]})"));
}

TEST(TokenTrie, MaskEqualsBruteForceOnEveryStepOfWalks) {
  const auto vocab = test::test_vocab();
  const TokenTrie trie(vocab);
  const auto g = JsonGrammar::from_schema(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":4},"n":{"type":"integer","minimum":-5,"maximum":300},"tags":{"type":"array","items":{"enum":["a","bc"]}}},"required":["name"]})");
  std::vector<uint8_t> allowed(vocab.size());
  TokenTrie::Scratch scratch;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    bool ok = false;
    const std::string out = test::random_walk(JsonMatcher(g), trie, seed, &ok);
    ASSERT_TRUE(ok) << out;
    for (size_t i = 0; i <= out.size(); i += 3) {  // many intermediate states
      JsonMatcher at(g);
      ASSERT_TRUE(at.advance(out.substr(0, i)));
      trie.allowed(at, allowed, scratch);
      for (size_t id = 0; id < vocab.size(); ++id) {
        JsonMatcher copy = at;
        const bool want = !vocab[id].empty() && copy.advance(vocab[id]);
        ASSERT_EQ(bool(allowed[id]), want)
            << "token '" << vocab[id] << "' after '" << out.substr(0, i) << "'";
      }
    }
  }
}

TEST(JsonConstraint, MasksEndUntilCompleteThenOnlyEnd) {
  auto vocab = test::test_vocab();
  const int32_t eos = int32_t(vocab.size()) - 1;  // the "" control token
  auto trie = std::make_shared<const TokenTrie>(vocab);
  SamplingParams p;
  p.response_format = ResponseFormat::JsonSchema;
  p.json_schema =
      R"({"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false})";
  p.temperature = 0;  // greedy: the highest logit is EOS
  Sampler s(p, int32_t(vocab.size()));
  s.constrain(JsonConstraint::from_params(p, trie, {eos}));
  std::string out;
  for (int step = 0; step < 50; ++step) {
    std::vector<float> logits(vocab.size(), 0.0f);
    logits[size_t(eos)] = 10.0f;  // the model would rather stop at once
    const int32_t t = s.sample(logits);
    s.accept(t, true);
    if (t == eos) break;
    out += vocab[size_t(t)];
  }
  EXPECT_TRUE(s.constraint()->complete()) << out;
  const auto v = test::json::parse(out);
  EXPECT_TRUE(v["ok"].is_boolean());
}

TEST(JsonConstraint, OnlyEndTokensOnceComplete) {
  auto vocab = test::test_vocab();
  const int32_t eos = int32_t(vocab.size()) - 1;
  auto trie = std::make_shared<const TokenTrie>(vocab);
  JsonConstraint c(JsonGrammar::from_schema(R"({"const":[1]})"), trie, {eos});
  std::vector<float> logits(vocab.size(), 0.0f);
  c.mask(logits);
  EXPECT_TRUE(std::isinf(logits[size_t(eos)]));       // nothing written yet: no EOS
  EXPECT_FALSE(std::isinf(logits[size_t('[' - 1)]));  // id of "[" in test_vocab
  for (const char* piece : {"[", "1", "]"}) {
    const auto it = std::find(vocab.begin(), vocab.end(), piece);
    c.accept(int32_t(it - vocab.begin()));
  }
  std::fill(logits.begin(), logits.end(), 0.0f);
  c.mask(logits);
  for (size_t id = 0; id < vocab.size(); ++id)
    EXPECT_EQ(std::isinf(logits[id]), int32_t(id) != eos) << id;
}

}  // namespace
}  // namespace tern
