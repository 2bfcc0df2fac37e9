// Grammar masks over the real SmolLM2 vocabulary, built the way a Sequence
// builds them (make_constraint): random walks through the mask must give
// JSON that validates. Skips when the model file is absent (the byte-level
// vocabulary tests in tests/unit/sampling always run).
#include <gtest/gtest.h>

#include <filesystem>

#include "../../../src/sched/sequence.h"
#include "../sampling/json_test_util.h"
#include "tern/gguf/gguf_file.h"
#include "testutil.h"

namespace tern::sched {
namespace {

TEST(Constraint, RandomWalksOverTheRealVocabularyValidate) {
  const std::string path = test::default_model_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no model at " << path;
  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::open(path));
  std::vector<std::string> pieces(size_t(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (!tok.is_control(id)) pieces[size_t(id)] = tok.token_to_piece(id);
  const TokenTrie trie(pieces);
  for (
      const char* schema : {
          R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120}},"required":["name","age"],"additionalProperties":false})",
          R"({"type":"array","items":{"enum":["red","green","blue"]},"maxItems":4})",
          R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"number","minimum":-1,"maximum":1},"kids":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/n"})",
          R"({"anyOf":[{"type":"string","minLength":2,"maxLength":6},{"type":"null"},{"type":"boolean"}]})",
          R"({"type":"object","additionalProperties":{"type":"integer"},"maxProperties_is_not_used":null})",
      }) {
    std::shared_ptr<const JsonGrammar> g;
    try {
      g = JsonGrammar::from_schema(schema);
    } catch (const SchemaError& e) {
      EXPECT_EQ(e.keyword(), "maxProperties_is_not_used");  // refused, never ignored
      continue;
    }
    const auto parsed = test::json::parse(schema);
    for (uint64_t seed = 0; seed < 6; ++seed) {
      bool ok = false;
      const std::string out = test::random_walk(JsonMatcher(g), trie, seed, &ok, 40);
      ASSERT_TRUE(ok) << out;
      const auto v = test::json::parse(out, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << out;
      EXPECT_TRUE(test::validates(v, parsed, parsed)) << out;
    }
  }
  // The Sequence path: one constraint per request, EOS only once complete.
  SamplingParams p;
  p.response_format = ResponseFormat::JsonObject;
  auto c = make_constraint(p, tok);
  ASSERT_TRUE(c);
  std::vector<float> logits(size_t(tok.n_vocab()), 0.0f);
  c->mask(logits);
  for (int32_t id : tok.eog_ids()) EXPECT_TRUE(std::isinf(logits[size_t(id)]));
  SamplingParams text;
  EXPECT_FALSE(make_constraint(text, tok));
}

}  // namespace
}  // namespace tern::sched
