// POST /v1/rerank: parsing (documents as strings or {"text"} objects, every
// refusal naming its field, truncation) and the response body (sorted,
// top_n, return_documents, TEI's shape).
#include <gtest/gtest.h>

#include "../../../src/server/rerank_route.h"
#include "tern/gguf/gguf.h"
#include "tern/tokenizer/rerank_prompt.h"
#include "tern/tokenizer/tokenizer.h"
#include "tiny_model.h"

namespace tern::server {
namespace {

using json = nlohmann::json;

struct Vocab {
  gguf::GgufFile file;
  Tokenizer tok;
  RerankPrompt prompt;
};

const Vocab& vocab() {
  static const Vocab v = [] {
    test::TinyModelSpec spec;
    spec.n_vocab = 131;  // 3 control tokens and the 128 ASCII bytes: any ASCII text encodes
    const std::string path = test::write_tiny_model(spec, "rerank_vocab.gguf");
    gguf::GgufFile f = gguf::GgufFile::open(path);
    Tokenizer t = Tokenizer::from_gguf(f);
    RerankPrompt p = RerankPrompt::from_gguf(f, t);
    return Vocab{std::move(f), std::move(t), std::move(p)};
  }();
  return v;
}

constexpr RerankLimits kLim{24, 32};  // 24 tokens a prompt, context 32

RerankRequest parse(const json& body, UnknownFields u = UnknownFields::Ignore) {
  return parse_rerank_request(body, vocab().tok, vocab().prompt, kLim, u);
}

std::pair<std::string, std::string> refusal(const json& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return {e.param(), e.code()};
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return {};
}

TEST(Rerank, DocumentsAsStringsOrTextObjects) {
  const RerankRequest r =
      parse({{"query", "q"}, {"documents", {"ab", {{"text", "cd"}}}}, {"model", "m"}});
  ASSERT_EQ(r.documents, (std::vector<std::string>{"ab", "cd"}));
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1], vocab().prompt.encode(vocab().tok, "q", "cd"));
  EXPECT_EQ(r.top_n, 2u);
  EXPECT_FALSE(r.return_documents);
  EXPECT_FALSE(r.tei);
  EXPECT_EQ(r.prompt_tokens, int64_t(r.prompts[0].size() + r.prompts[1].size()));
  EXPECT_EQ(parse({{"query", "q"}, {"documents", {"a", "b", "c"}}, {"top_n", 9}}).top_n, 3u);
  EXPECT_EQ(parse({{"query", "q"}, {"documents", {"a", "b", "c"}}, {"top_n", 2}}).top_n, 2u);
  EXPECT_TRUE(parse({{"query", "q"}, {"texts", {"a"}}}).tei);
}

// Without a rerank template: the query's and the document's tokens (no
// specials parsed), with the vocabulary's markers between.
TEST(Rerank, PromptWithoutTemplate) {
  const Tokenizer& t = vocab().tok;
  std::vector<int32_t> want;
  if (t.add_bos_default()) want.push_back(t.bos());
  for (int32_t id : t.encode("qq", false, false)) want.push_back(id);
  for (int32_t id : t.encode("dd", false, false)) want.push_back(id);
  EXPECT_EQ(vocab().prompt.encode(t, "qq", "dd"), want);
}

TEST(Rerank, RefusalsNameTheField) {
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(refusal({{"documents", {"a"}}}), P("query", "missing_required_parameter"));
  EXPECT_EQ(refusal({{"query", ""}, {"documents", {"a"}}}).first, "query");
  EXPECT_EQ(refusal({{"query", 3}, {"documents", {"a"}}}).first, "query");
  EXPECT_EQ(refusal({{"query", "q"}}).first, "documents");
  EXPECT_EQ(refusal({{"query", "q"}, {"documents", json::array()}}).first, "documents");
  EXPECT_EQ(refusal({{"query", "q"}, {"documents", "a"}}).first, "documents");
  EXPECT_EQ(refusal({{"query", "q"}, {"documents", {"a", 3}}}).first, "documents[1]");
  EXPECT_EQ(refusal({{"query", "q"}, {"documents", {"a", {{"txt", "b"}}}}}).first,
            "documents[1].text");
  EXPECT_EQ(refusal({{"query", "q"}, {"documents", {"a"}}, {"top_n", 0}}).first, "top_n");
  EXPECT_EQ(refusal({{"query", "q"}, {"documents", std::vector<std::string>(1001, "a")}}).first,
            "documents");
  EXPECT_EQ(refusal({{"query", "q"}, {"documents", {"a", std::string(40, 'x')}}}),
            P("documents[1]", "context_length_exceeded"));
  EXPECT_EQ(refusal({{"query", std::string(40, 'x')}, {"documents", {"a"}}, {"truncate", true}}),
            P("query", "context_length_exceeded"));
}

TEST(Rerank, TruncateCutsTheDocument) {
  const RerankRequest r =
      parse({{"query", "q"}, {"documents", {"a", std::string(40, 'x')}}, {"truncate", true}});
  EXPECT_LE(r.prompts[1].size(), 24u);
  EXPECT_GE(r.prompts[1].size(), 20u);  // cut to fit, not emptied
  EXPECT_EQ(r.prompts[0], vocab().prompt.encode(vocab().tok, "q", "a"));
  const RerankRequest k = parse(
      {{"query", "q"}, {"documents", {std::string(40, 'x')}}, {"truncate_prompt_tokens", 10}});
  EXPECT_LE(k.prompts[0].size(), 10u);
}

TEST(Rerank, BodySortsCutsAndReturnsDocuments) {
  RerankRequest r = parse({{"query", "q"}, {"documents", {"a", "b", "c"}}, {"top_n", 2}});
  r.prompt_tokens = 12;
  const std::vector<float> scores = {0.25f, 0.75f, 0.5f};
  json b = rerank_body(r, scores, "served");
  EXPECT_EQ(b["model"], "served");
  EXPECT_EQ(b["object"], "list");
  EXPECT_EQ(b["usage"], (json{{"prompt_tokens", 12}, {"total_tokens", 12}}));
  ASSERT_EQ(b["results"].size(), 2u);
  EXPECT_EQ(b["results"][0], (json{{"index", 1}, {"relevance_score", 0.75}}));
  EXPECT_EQ(b["results"][1]["index"], 2);
  r.return_documents = true;
  r.model = "asked";
  b = rerank_body(r, scores, "served");
  EXPECT_EQ(b["model"], "asked");
  EXPECT_EQ(b["results"][0]["document"], (json{{"text", "b"}}));
  // Ties keep document order.
  const std::vector<float> tied = {0.5f, 0.5f, 0.5f};
  b = rerank_body(r, tied, "m");
  EXPECT_EQ(b["results"][0]["index"], 0);
  EXPECT_EQ(b["results"][1]["index"], 1);
  // TEI's shape: a bare array with "score" (and "text" for return_text).
  RerankRequest t = parse({{"query", "q"}, {"texts", {"a", "b"}}, {"return_text", true}});
  b = rerank_body(t, std::vector<float>{0.1f, 0.9f}, "m");
  ASSERT_TRUE(b.is_array());
  EXPECT_EQ(b[0], (json{{"index", 1}, {"score", 0.9}, {"text", "b"}}));
}

}  // namespace
}  // namespace tern::server
