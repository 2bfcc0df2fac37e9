// Rerank scores against llama.cpp: tests/fixtures/rerank_golden.json holds
// llama-server --reranking's relevance scores on the generated decoder
// reranker (`tern gen-arch-model --arch qwen3-reranker --seed 7`), one query
// and five documents, with each prompt's token ids (the rerank template
// filled in; scripts/oracle/gen_rerank_golden.py). The test regenerates the
// file from the seed (no download; the weights' SHA-256 must be what
// llama.cpp ran on), runs each prompt as the scheduler runs it (hidden rows,
// the last one through the classification head) and compares.
//
// Tolerance. The score is softmax over the head's two logits, P(yes) =
// sigmoid(l_yes - l_no), so a logit error e moves it by at most p(1 - p) e
// <= e / 4. Both engines quantize activations to int8 (tern per row,
// llama.cpp q8_0 per block of 32) in every linear layer; the architecture
// oracle measures that error on these Qwen3 shapes at about 0.1 logit (and
// the head here is in F32, exact in both). 0.1 / 4 = 0.025 bounds each
// score; measured: at most 0.0053. The order must agree wherever llama.cpp's
// scores differ by more than twice that.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "tern/core/task_pool.h"
#include "tern/engine/engine.h"
#include "tern/gguf/gguf.h"
#include "tern/kv/paged_kv.h"
#include "tern/model/gen_arch.h"
#include "tern/model/model.h"
#include "tern/model/pooling.h"
#include "tern/tokenizer/rerank_prompt.h"
#include "tern/tokenizer/tokenizer.h"
#include "testutil.h"

namespace tern {
namespace {

constexpr double kTolerance = 0.025;

const nlohmann::json& golden() {
  static const nlohmann::json j = [] {
    std::ifstream in(test::fixture_path("rerank_golden.json"));
    return nlohmann::json::parse(in);
  }();
  return j;
}

struct Reranker {
  std::shared_ptr<const gguf::GgufFile> file;
  TaskPool pool{2};
  std::unique_ptr<Model> model;
  std::unique_ptr<kv::PagedKv> kv;
};

Reranker& reranker() {
  static const std::unique_ptr<Reranker> r = [] {
    auto p = std::make_unique<Reranker>();
    Reranker& l = *p;
    const auto& g = golden();
    GenArchResult gen = generate_arch_model(g["arch"], g["seed"].get<uint64_t>(), nullptr);
    EXPECT_EQ(gen.weights_sha256, g["weights_sha256"].get<std::string>())
        << "the generator no longer makes the file llama.cpp ran on";
    const std::string path = test::temp_path("qwen3-reranker.gguf");
    gen.writer.write(path);
    l.file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(path));
    l.model = Model::load(l.file, {}, l.pool);
    const ModelConfig& c = l.model->config();
    kv::KvConfig k;
    k.n_layers = c.n_layers;
    k.n_kv_heads = c.n_kv_heads;
    k.head_dim = c.head_dim;
    k.type = kv::KvType::F16;  // llama.cpp's cache type
    k.max_seqs = 4;
    k.max_seq_tokens = 256;
    k.dram_bytes = size_t(32) << 20;
    l.kv = std::make_unique<kv::PagedKv>(k);
    return p;
  }();
  return *r;
}

// The head's outputs for `tokens`, prefilled in chunks of `chunk`.
std::vector<float> rank(Reranker& r, const std::vector<int32_t>& tokens, size_t chunk) {
  const SeqId s = r.kv->create();
  Pooler pooler(Pooling::Rank, r.model->config().d_model, r.model->rank_head());
  StepOutput out;
  for (size_t b = 0; b < tokens.size(); b += chunk) {
    const size_t n = std::min(chunk, tokens.size() - b);
    Batch batch;
    batch.entries.push_back(
        {s, std::span<const int32_t>(tokens).subspan(b, n), LogitsMode::Hidden});
    r.model->forward(batch, *r.kv, out, r.pool);
    pooler.add(out.hidden_rows(0, int(n)), int(n));
  }
  r.kv->release(s);
  return pooler.result();
}

TEST(RerankOracle, FileCarriesTheHead) {
  Reranker& r = reranker();
  const RankHead* head = r.model->rank_head();
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(r.model->config().pooling, Pooling::Rank);
  EXPECT_EQ(head->rows(), Pooling::Last);
  EXPECT_EQ(head->n_out(), 2);
  EXPECT_EQ(head->labels(), (std::vector<std::string>{"yes", "no"}));
}

TEST(RerankOracle, ScoresMatchLlamaServer) {
  Reranker& r = reranker();
  std::vector<double> tern, llama;
  double worst = 0;
  for (const auto& c : golden()["cases"]) {
    const std::vector<float> y = rank(r, c["tokens"].get<std::vector<int32_t>>(), 512);
    ASSERT_EQ(y.size(), 2u);
    EXPECT_NEAR(y[0] + y[1], 1.0, 1e-6);  // softmax over yes / no
    tern.push_back(y[0]);
    llama.push_back(c["score"].get<double>());
    worst = std::max(worst, std::abs(tern.back() - llama.back()));
    EXPECT_NEAR(tern.back(), llama.back(), kTolerance) << c["document"];
  }
  for (size_t i = 0; i < tern.size(); ++i)
    for (size_t j = 0; j < tern.size(); ++j)
      if (llama[i] > llama[j] + 2 * kTolerance) EXPECT_GT(tern[i], tern[j]) << i << " vs " << j;
  std::printf("rerank oracle: %zu scores, max |tern - llama.cpp| %.6f\n", tern.size(), worst);
}

// Chunked prefill scores exactly as one pass.
TEST(RerankOracle, ChunkingChangesNothing) {
  Reranker& r = reranker();
  const auto ids = golden()["cases"][3]["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(rank(r, ids, 7), rank(r, ids, 512));
}

// The prompt tern builds is the one llama.cpp scored (needs SmolLM2's
// tokenizer, which the generated file was given for llama.cpp).
TEST(RerankOracle, PromptMatchesLlamaServer) {
  if (!test::file_exists(test::default_model_path()))
    GTEST_SKIP() << "models not found: run scripts/setup.sh";
  const gguf::GgufFile smol = gguf::GgufFile::open(test::default_model_path());
  const Tokenizer tok = Tokenizer::from_gguf(smol);
  const RerankPrompt prompt = RerankPrompt::from_gguf(*reranker().file, tok);
  ASSERT_FALSE(prompt.rerank_template().empty());
  for (const auto& c : golden()["cases"]) {
    EXPECT_EQ(
        prompt.encode(tok, golden()["query"].get<std::string>(), c["document"].get<std::string>()),
        c["tokens"].get<std::vector<int32_t>>())
        << c["document"];
  }
}

// A cross-encoder of tern gen-arch-model against llama-server --reranking
// (the fixture `name`): the file regenerated from the seed, each document's
// prompt built as tern builds it (its length must be llama.cpp's), scored in
// one step through the classification head on the first row. With
// `expect_ids` the prompt's ids must also be `expect_ids(case)`.
void check_cross_encoder(
    const std::string& name,
    const std::function<std::vector<int32_t>(const nlohmann::json&)>& expect_ids = {}) {
  std::ifstream in(test::fixture_path(name));
  const nlohmann::json g = nlohmann::json::parse(in);
  const GenArchResult gen = generate_arch_model(g["arch"], g["seed"].get<uint64_t>(), nullptr);
  ASSERT_EQ(gen.weights_sha256, g["weights_sha256"].get<std::string>())
      << "the generator no longer makes the file llama.cpp ran on";
  const std::string path = test::temp_path(g["arch"].get<std::string>() + ".gguf");
  gen.writer.write(path);
  EngineOptions o;
  o.model_path = path;
  o.max_seqs = 2;
  o.kv_flash_mb = 0;
  auto e = Engine::load(o);
  ASSERT_NE(e->rank_head(), nullptr);
  EXPECT_EQ(e->rank_head()->rows(), Pooling::Cls);
  const RerankPrompt prompt = RerankPrompt::from_gguf(gguf::GgufFile::open(path), e->tokenizer());
  double worst = 0;
  for (const auto& c : g["cases"]) {
    const std::vector<int32_t> ids = prompt.encode(e->tokenizer(), g["query"].get<std::string>(),
                                                   c["document"].get<std::string>());
    EXPECT_EQ(int(ids.size()), c["prompt_tokens"].get<int>()) << c["document"];
    if (expect_ids) EXPECT_EQ(ids, expect_ids(c)) << c["document"];
    const SeqId s = e->new_sequence();
    Batch batch;
    batch.entries.push_back({s, ids, LogitsMode::Hidden});
    StepOutput out;
    e->step(batch, out);
    Pooler pooler(Pooling::Rank, e->config().d_model, e->rank_head());
    pooler.add(out.hidden_rows(0, int(ids.size())), int(ids.size()));
    e->free_sequence(s);
    const double got = pooler.result()[0], want = c["score"].get<double>();
    worst = std::max(worst, std::abs(got - want));
    EXPECT_NEAR(got, want, 0.02) << c["document"];
  }
  std::printf("rerank oracle (%s): max |tern - llama.cpp| %.6f\n",
              g["arch"].get<std::string>().c_str(), worst);
}

// A BERT cross-encoder (`tern gen-arch-model --arch bert-reranker --seed 7`:
// bidirectional encoder, its own WordPiece vocabulary, cls.weight + tanh then
// cls.output on the [CLS] row) against llama-server --reranking:
// tests/fixtures/rerank_bert_golden.json. No template: the prompt is [CLS]
// query [SEP] [SEP] doc [SEP] as llama.cpp assembles it, whose length the
// fixture records per document. The score is the head's raw output; the
// encoder's vectors agree with llama.cpp's to cosine 0.9997
// (encoder_oracle_test.cpp); on these scores that is up to 0.015 (bound 0.02).
TEST(RerankOracle, BertCrossEncoderMatchesLlamaServer) {
  check_cross_encoder("rerank_bert_golden.json");
}

// An XLM-R cross-encoder (`--arch xlmr-reranker --seed 7`, bge-reranker-v2-m3
// style: arch "bert" with a unigram vocabulary and its charsmap, one token
// type, the same head): tests/fixtures/rerank_xlmr_golden.json. The prompt
// is <s> query </s> </s> doc </s> (BOS, EOS, then the separator, which is
// </s> again), each text tokenized without special tokens; the fixture holds
// llama.cpp's ids of the query and of each document, so the whole prompt is
// checked id by id. Same bound as the BERT case.
TEST(RerankOracle, XlmrCrossEncoderMatchesLlamaServer) {
  std::ifstream in(test::fixture_path("rerank_xlmr_golden.json"));
  const nlohmann::json g = nlohmann::json::parse(in);
  const auto query = g["query_tokens"].get<std::vector<int32_t>>();
  const int32_t bos = 0, eos = 2;  // <s>, </s> (also the separator)
  check_cross_encoder("rerank_xlmr_golden.json", [&](const nlohmann::json& c) {
    std::vector<int32_t> ids{bos};
    ids.insert(ids.end(), query.begin(), query.end());
    ids.insert(ids.end(), {eos, eos});
    const auto doc = c["document_tokens"].get<std::vector<int32_t>>();
    ids.insert(ids.end(), doc.begin(), doc.end());
    ids.push_back(eos);
    return ids;
  });
}

}  // namespace
}  // namespace tern
