// A reranker's classification head (model/rank_head.h) on hand-made weights,
// and rank pooling through the Pooler.
#include "tern/model/rank_head.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tern/core/error.h"
#include "tern/gguf/gguf.h"

namespace tern {
namespace {

// A decoder reranker's head: two output rows, softmax (Qwen3).
RankHeadWeights yes_no() {
  RankHeadWeights w;
  w.rows = Pooling::Last;
  w.d_in = 3;
  w.out = {1, 0, 0,   // yes
           0, 1, 0};  // no
  w.n_out = 2;
  w.softmax = true;
  w.labels = {"yes", "no"};
  return w;
}

TEST(RankHead, SoftmaxOverYesNo) {
  const RankHead h(yes_no());
  const std::vector<float> y = h.apply(std::vector<float>{2.0f, 1.0f, 5.0f});
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);  // sigmoid(yes - no)
  EXPECT_NEAR(y[0] + y[1], 1.0, 1e-6);
  EXPECT_FLOAT_EQ(h.score(std::vector<float>{2.0f, 1.0f, 5.0f}), y[0]);
}

// BERT-style: dense + tanh, then one output with its bias, no softmax.
TEST(RankHead, DenseTanhThenOutput) {
  RankHeadWeights w;
  w.rows = Pooling::Cls;
  w.d_in = 2;
  w.dense = {1, 0, 0, 2};  // (2, 2)
  w.dense_b = {0.5f, 0};
  w.out = {1, -1};  // (1, 2)
  w.out_b = {0.25f};
  const RankHead h(w);
  const float want = float(std::tanh(1.0 + 0.5) - std::tanh(2.0 * -1.0) + 0.25);
  EXPECT_NEAR(h.score(std::vector<float>{1.0f, -1.0f}), want, 1e-6);
}

// A head of only cls.weight (jina-reranker-v1-tiny): its outputs are the dense layer's.
TEST(RankHead, DenseOnly) {
  RankHeadWeights w;
  w.rows = Pooling::Cls;
  w.d_in = 2;
  w.dense = {1, 1};  // (1, 2)
  w.n_out = 1;
  const RankHead h(w);
  EXPECT_NEAR(h.score(std::vector<float>{0.25f, 0.25f}), std::tanh(0.5), 1e-6);
}

TEST(RankHead, RefusesInconsistentShapes) {
  RankHeadWeights w = yes_no();
  w.out.pop_back();
  EXPECT_THROW(RankHead{w}, InvalidArgument);
  w = yes_no();
  w.labels = {"yes"};
  EXPECT_THROW(RankHead{w}, InvalidArgument);
  w = yes_no();
  w.rows = Pooling::Rank;
  EXPECT_THROW(RankHead{w}, InvalidArgument);
  EXPECT_THROW(RankHead(yes_no()).apply(std::vector<float>{1.0f}), InvalidArgument);
}

// Rank pooling: the head's rows (the last here), then its outputs.
TEST(RankHead, PoolerRanksTheLastRow) {
  const RankHead h(yes_no());
  Pooler p(Pooling::Rank, 3, &h);
  p.add(std::vector<float>{9, 9, 9, 0, 0, 0}, 2);  // chunk 1: two rows
  p.add(std::vector<float>{3, 1, 0}, 1);           // chunk 2: the last row
  const std::vector<float> y = p.result();
  EXPECT_NEAR(y[0], 1.0 / (1.0 + std::exp(-2.0)), 1e-6);
  EXPECT_THROW(Pooler(Pooling::Rank, 3), InvalidArgument);      // no head
  EXPECT_THROW(Pooler(Pooling::Rank, 4, &h), InvalidArgument);  // wrong width
  EXPECT_EQ(parse_pooling("rank"), Pooling::Rank);
  EXPECT_STREQ(to_string(Pooling::Rank), "rank");
}

// From a file: the tensors, labels and pooling as llama.cpp's converter writes them.
TEST(RankHead, FromGguf) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "qwen3");
  w.set_u32("qwen3.embedding_length", 2);
  w.set_string_array("qwen3.classifier.output_labels", {"yes", "no"});
  const std::vector<float> out = {1, 0, 0, 1};
  w.add_tensor_f32("cls.output.weight", {2, 2}, out);
  const std::vector<uint8_t> file = w.to_bytes();
  const gguf::GgufFile f = gguf::GgufFile::from_memory(file, "head.gguf");
  const auto h = RankHead::from_gguf(f, "qwen3", true);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->n_out(), 2);
  EXPECT_EQ(h->rows(), Pooling::Last);
  EXPECT_NEAR(h->score(std::vector<float>{1.0f, 0.0f}), 1.0 / (1.0 + std::exp(-1.0)), 1e-6);

  gguf::GgufWriter none;
  none.set_string("general.architecture", "qwen3");
  none.set_u32("qwen3.embedding_length", 2);
  const std::vector<uint8_t> nb = none.to_bytes();
  EXPECT_FALSE(RankHead::from_gguf(gguf::GgufFile::from_memory(nb, "x.gguf"), "qwen3", true));
}

}  // namespace
}  // namespace tern
