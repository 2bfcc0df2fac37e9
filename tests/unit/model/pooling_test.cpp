// Pooling and normalisation of embeddings (model/pooling.h), on hand-made rows.
#include "tern/model/pooling.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tern/core/error.h"

namespace tern {
namespace {

// Rows (n, 3): row t is {t+1, -(t+1), 2(t+1)}.
std::vector<float> rows(int first, int n) {
  std::vector<float> r;
  for (int t = first; t < first + n; ++t) {
    const float v = float(t + 1);
    r.insert(r.end(), {v, -v, 2 * v});
  }
  return r;
}

TEST(Pooling, MeanClsLast) {
  const std::vector<float> r = rows(0, 4);  // values 1..4
  Pooler mean(Pooling::Mean, 3), cls(Pooling::Cls, 3), last(Pooling::Last, 3);
  for (Pooler* p : {&mean, &cls, &last}) p->add(r, 4);
  EXPECT_EQ(mean.result(), (std::vector<float>{2.5f, -2.5f, 5.0f}));
  EXPECT_EQ(cls.result(), (std::vector<float>{1.0f, -1.0f, 2.0f}));
  EXPECT_EQ(last.result(), (std::vector<float>{4.0f, -4.0f, 8.0f}));
  EXPECT_EQ(mean.count(), 4);
}

TEST(Pooling, ChunksPoolAsOneRun) {
  for (Pooling p : {Pooling::Mean, Pooling::Cls, Pooling::Last}) {
    Pooler whole(p, 3), chunked(p, 3);
    whole.add(rows(0, 7), 7);
    chunked.add(rows(0, 2), 2);
    chunked.add(rows(2, 1), 1);
    chunked.add(rows(3, 4), 4);
    EXPECT_EQ(chunked.result(), whole.result()) << to_string(p);
  }
}

TEST(Pooling, ResetForgetsEverything) {
  Pooler p(Pooling::Cls, 3);
  p.add(rows(5, 2), 2);
  p.reset();
  EXPECT_EQ(p.count(), 0);
  EXPECT_THROW(p.result(), InvalidArgument);
  p.add(rows(0, 1), 1);
  EXPECT_EQ(p.result(), (std::vector<float>{1.0f, -1.0f, 2.0f}));
}

TEST(Pooling, RefusesBadUse) {
  EXPECT_THROW(Pooler(Pooling::None, 3), InvalidArgument);
  EXPECT_THROW(Pooler(Pooling::Mean, 0), InvalidArgument);
  Pooler p(Pooling::Mean, 3);
  EXPECT_THROW(p.add(rows(0, 1), 2), InvalidArgument);  // fewer rows than n
}

TEST(Pooling, Names) {
  EXPECT_EQ(parse_pooling("mean"), Pooling::Mean);
  EXPECT_EQ(parse_pooling("cls"), Pooling::Cls);
  EXPECT_EQ(parse_pooling("last"), Pooling::Last);
  EXPECT_EQ(parse_pooling("rank"), Pooling::Rank);
  EXPECT_EQ(parse_pooling("RANK"), std::nullopt);
  EXPECT_EQ(parse_pooling("Mean"), std::nullopt);
  EXPECT_STREQ(to_string(Pooling::Last), "last");
}

TEST(Pooling, ResolveFlagThenFileThenMean) {
  EXPECT_EQ(resolve_pooling(Pooling::None, std::nullopt), Pooling::Mean);
  EXPECT_EQ(resolve_pooling(Pooling::Last, std::nullopt), Pooling::Last);
  EXPECT_EQ(resolve_pooling(Pooling::Last, Pooling::Cls), Pooling::Cls);
  EXPECT_EQ(resolve_pooling(Pooling::None, Pooling::Cls), Pooling::Cls);
}

TEST(Pooling, L2Normalize) {
  std::vector<float> v{3, 4};
  l2_normalize(v);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  std::vector<float> z{0, 0, 0};
  l2_normalize(z);  // stays zero, no NaN
  EXPECT_EQ(z, (std::vector<float>{0, 0, 0}));
}

TEST(Pooling, DimensionsTruncateThenRenormalize) {
  const std::vector<float> v{3, 4, 12};  // norm 13
  const std::vector<float> all = finish_embedding(v, 0, true);
  EXPECT_FLOAT_EQ(all[2], 12.0f / 13.0f);
  const std::vector<float> two = finish_embedding(v, 2, true);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_FLOAT_EQ(two[0], 0.6f);  // renormalised over the first two
  EXPECT_FLOAT_EQ(two[1], 0.8f);
  EXPECT_EQ(finish_embedding(v, 5, false), v);  // more than it has: all of it
  EXPECT_EQ(finish_embedding(v, 1, false), std::vector<float>{3});
}

}  // namespace
}  // namespace tern
