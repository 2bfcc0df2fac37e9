// Random walks through the token mask for many schemas: every output must
// parse and validate, whatever tokens the walk picked.
#include "tern/sampling/json_schema.h"

#include <gtest/gtest.h>

#include <chrono>

#include "json_test_util.h"

namespace tern {
namespace {

using test::json;

const char* const kSchemas[] = {
    R"({"type":"string"})",
    R"({"type":"integer"})",
    R"({"type":"number"})",
    R"({"type":"boolean"})",
    R"({"type":"null"})",
    R"({})",
    R"(true)",
    R"({"type":["string","null"]})",
    R"({"type":"string","nullable":true})",
    R"({"enum":["red","green","blue",1,null,{"a":[1]}]})",
    R"({"const":{"k":"v","n":[1,2]}})",
    R"({"type":"string","minLength":3,"maxLength":5})",
    R"({"type":"string","maxLength":0})",
    R"({"type":"string","minLength":2})",
    R"({"type":"integer","minimum":5,"maximum":12})",
    R"({"type":"integer","minimum":-20,"maximum":-3})",
    R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":100})",
    R"({"type":"integer","minimum":1000})",
    R"({"type":"number","minimum":0.5,"maximum":1.5})",
    R"({"type":"number","exclusiveMinimum":0,"maximum":0.01})",
    R"({"type":"number","minimum":-1,"exclusiveMaximum":1})",
    R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false})",
    R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"boolean"}},"additionalProperties":false})",
    R"({"type":"object","properties":{"a":{"type":"string"}},"required":["a"]})",
    R"({"type":"object","additionalProperties":{"type":"integer"}})",
    R"({"type":"object"})",
    R"({"type":"object","properties":{"ab":{"type":"integer"},"a":{"type":"integer"},"abc":{"type":"integer"}},"additionalProperties":false})",
    R"({"type":"object","properties":{"quo\"te":{"type":"integer"},"é日":{"type":"string"}},"required":["quo\"te"],"additionalProperties":false})",
    R"({"type":"object","properties":{"user":{"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["id","tags"],"additionalProperties":false}},"required":["user"],"additionalProperties":false})",
    R"({"type":"array","items":{"type":"integer"}})",
    R"({"type":"array","items":{"type":"string"},"minItems":2,"maxItems":3})",
    R"({"type":"array","items":false,"prefixItems":[{"type":"string"},{"type":"integer"}]})",
    R"({"type":"array","prefixItems":[{"const":"x"}],"items":{"type":"boolean"},"minItems":3})",
    R"({"type":"array","maxItems":0})",
    R"({"type":"array","items":{"type":"array","items":{"type":"number"},"maxItems":2},"maxItems":3})",
    R"({"anyOf":[{"type":"string"},{"type":"integer"}]})",
    R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind","x"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"b"},"y":{"type":"string"}},"required":["kind","y"],"additionalProperties":false}]})",
    R"({"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false},{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}]})",
    R"({"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"],"additionalProperties":false}},"type":"array","items":{"$ref":"#/$defs/pt"},"maxItems":3})",
    R"({"definitions":{"c":{"enum":["a","b"]}},"type":"object","properties":{"c":{"$ref":"#/definitions/c"}},"required":["c"],"additionalProperties":false})",
    R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["value"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
    R"({"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false})",
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"email":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null}},"required":["name","email"],"title":"User","additionalProperties":false})",
    R"({"allOf":[{"type":"object","properties":{"q":{"type":"boolean"}},"required":["q"],"additionalProperties":false}]})",
    R"({"type":["integer","string","array"],"items":{"type":"null"},"maxItems":2})",
    R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["b"],"additionalProperties":{"type":"boolean"}})",
    R"({"type":"object","properties":{"s":{"type":"string","minLength":1,"maxLength":1}},"required":["s"],"additionalProperties":false})",
    R"({"type":"integer","minimum":0,"maximum":0})",
    R"({"type":"number","minimum":2.5,"maximum":2.5})",
    R"({"type":"array","items":{"enum":[true,false,null]},"minItems":1})",
};

class JsonSchemaWalk : public ::testing::TestWithParam<size_t> {};

TEST_P(JsonSchemaWalk, EveryWalkParsesAndValidates) {
  static const auto vocab = test::test_vocab();
  static const TokenTrie trie(vocab);
  const json schema = json::parse(kSchemas[GetParam()]);
  const auto grammar = JsonGrammar::from_schema(kSchemas[GetParam()]);
  for (uint64_t seed = 0; seed < 25; ++seed) {
    bool ok = false;
    const std::string out =
        test::random_walk(JsonMatcher(grammar), trie, seed * 7919 + GetParam(), &ok);
    ASSERT_TRUE(ok) << "stuck after: " << out;
    const json v = json::parse(out, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << "not JSON: " << out;
    EXPECT_TRUE(test::validates(v, schema, schema))
        << out << "\n  against " << kSchemas[GetParam()];
  }
}

INSTANTIATE_TEST_SUITE_P(Schemas, JsonSchemaWalk,
                         ::testing::Range<size_t>(0, sizeof(kSchemas) / sizeof(kSchemas[0])));

TEST(JsonSchema, RefusesKeywordsItCannotEnforce) {
  for (const char* kw : {"pattern", "format", "multipleOf", "uniqueItems", "minProperties",
                         "patternProperties", "contains", "not", "if", "dependentRequired"}) {
    const std::string s = std::string(R"({"type":"string",")") + kw + R"(":"x"})";
    try {
      JsonGrammar::from_schema(s);
      ADD_FAILURE() << kw << " was accepted";
    } catch (const SchemaError& e) {
      EXPECT_EQ(e.keyword(), kw);
      EXPECT_NE(std::string(e.what()).find(kw), std::string::npos) << e.what();
    }
  }
}

TEST(JsonSchema, RefusesMalformedSchemas) {
  for (const char* s : {"{not json", R"({"type":"strin"})", R"({"$ref":"#/$defs/missing"})",
                        R"({"type":"object","required":["x"],"properties":{}})", R"(false)",
                        R"({"type":"string","minLength":4,"maxLength":2})",
                        R"({"type":"integer","minimum":3,"maximum":2})", R"({"allOf":[{},{}]})",
                        R"({"$ref":"https://example.com/s.json"})", R"([1])",
                        R"({"type":"string","nullable":"yes"})"})
    EXPECT_THROW(JsonGrammar::from_schema(s), SchemaError) << s;
}

std::string nested_arrays(int levels) {
  std::string s;
  for (int i = 0; i < levels; ++i) s += R"({"type":"array","items":)";
  s += R"({"type":"string"})";
  return s + std::string(size_t(levels), '}');
}

// Depth is bounded before parsing, with the JSON path of the first node too
// deep; 50,000 levels used to take forever (ordered_json parsing is cubic).
TEST(JsonSchema, DeepSchemasAreRefusedFastNamingThePath) {
  EXPECT_NO_THROW(JsonGrammar::from_schema(nested_arrays(40)));
  for (int levels : {65, 1000, 50000}) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      JsonGrammar::from_schema(nested_arrays(levels));
      ADD_FAILURE() << levels << " levels accepted";
    } catch (const SchemaError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("$.items.items"), std::string::npos) << m;
      EXPECT_NE(m.find("64 levels"), std::string::npos) << m;
      EXPECT_EQ(m.find("$ref"), std::string::npos) << m;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1)) << levels;
  }
}

// A large subtree followed by siblings, at every level: each sibling used to
// copy the subtree again (97 kB took 7 s); now linear.
TEST(JsonSchema, LargeSchemasWithinTheBoundsCompileFast) {
  std::string s = R"({"type":"array","items":{"enum":[)";
  for (int i = 0; i < 40000; ++i) s += (i ? ",1" : "1");
  s += "]}}";
  for (int l = 0; l < 30; ++l) {
    std::string wrap = R"({"type":"object","properties":{"a":)" + s;
    for (int j = 0; j < 12; ++j) wrap += R"(,"s)" + std::to_string(j) + R"(":{"type":"integer"})";
    s = wrap + "}}";
  }
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(JsonGrammar::from_schema(s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

TEST(JsonSchema, TooManyValuesOrKeysNameTheirPlace) {
  std::string many = R"({"enum":[)";
  for (int i = 0; i < 60000; ++i) many += (i ? ",1" : "1");
  many += "]}";
  try {
    JsonGrammar::from_schema(many);
    ADD_FAILURE() << "accepted";
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("$.enum["), std::string::npos) << e.what();
  }
  std::string keys = R"({"type":"object","properties":{)";
  for (int i = 0; i < 6000; ++i)
    keys += (i ? "," : "") + std::string("\"k") + std::to_string(i) + "\":{}";
  keys += "}}";
  EXPECT_THROW(JsonGrammar::from_schema(keys), SchemaError);
}

}  // namespace
}  // namespace tern
