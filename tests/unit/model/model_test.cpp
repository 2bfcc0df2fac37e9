// Model-level tests on small generated GGUF models:
//  * an independent, naive fp32 forward pass (dequantized weights, no int8
//    activations, a plain softmax) agrees with the engine within the error
//    that W4A8 quantization explains;
//  * batching never changes results: the same sequence gives bit-identical
//    logits alone, in a batch with others, and with its prompt cut into chunks.
#include "tern/model/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "naive_forward.h"
#include "tern/core/error.h"
#include "tern/core/task_pool.h"
#include "tern/kernels/dequant.h"
#include "tern/kv/paged_kv.h"
#include "testutil.h"
#include "tiny_model.h"

namespace tern {
namespace {

using test::TinyModelSpec;
using namespace reference;

struct Loaded {
  std::shared_ptr<const gguf::GgufFile> file;
  std::unique_ptr<Model> model;
};

Loaded load(const TinyModelSpec& spec, const std::string& name, TaskPool& pool) {
  const std::string path = test::write_tiny_model(spec, name);
  auto file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(path));
  auto model = Model::load(file, {}, pool);
  return {file, std::move(model)};
}

std::vector<float> run_one(Model& m, kv::PagedKv& kv, TaskPool& pool, SeqId s,
                           const std::vector<int32_t>& toks) {
  Batch b;
  b.entries.push_back({s, toks, LogitsMode::Last});
  StepOutput out;
  m.forward(b, kv, out, pool);
  auto r = out.last(0);
  return {r.begin(), r.end()};
}

class ModelArch : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelArch, MatchesNaiveFp32Forward) {
  TaskPool pool(2);
  TinyModelSpec spec;
  spec.arch = GetParam();
  auto L = load(spec, "naive_" + spec.arch + ".gguf", pool);
  const ModelConfig& c = L.model->config();
  TestKv kv(c, 256, 4);
  const std::vector<int32_t> toks = {5, 17, 42, 8, 77, 3, 60, 21, 9, 33, 12};
  const auto got = run_one(*L.model, kv, pool, kv.alloc(), toks);
  const auto want = naive_forward(*L.file, c, toks);
  // Error budget: int8 activations (~0.4% per matmul) through 2 layers; compare
  // relative to the spread of the logits.
  double norm = 0, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    norm += double(want[i]) * want[i];
    err += double(got[i] - want[i]) * (got[i] - want[i]);
  }
  std::printf("relative L2 error %.5f\n", std::sqrt(err / norm));
  EXPECT_LT(std::sqrt(err / norm), 0.03) << "relative L2 error of logits";
  const auto argmax = [](const std::vector<float>& v) {
    return std::max_element(v.begin(), v.end()) - v.begin();
  };
  EXPECT_EQ(argmax(got), argmax(want));
}

INSTANTIATE_TEST_SUITE_P(Archs, ModelArch, ::testing::Values("llama", "qwen2"));

// The activation comes from the architecture table; <arch>.feed_forward_activation
// overrides it. A GeGLU model matches the naive forward with gelu_tanh and
// differs from the same weights run with SwiGLU.
TEST(Model, GeluActivationIsHonoured) {
  TaskPool pool(2);
  TinyModelSpec spec;
  auto silu = load(spec, "act_silu.gguf", pool);
  EXPECT_EQ(silu.model->config().act, Activation::SiLU);  // llama's default
  spec.activation = "gelu_tanh";
  auto gelu = load(spec, "act_gelu.gguf", pool);
  const ModelConfig& c = gelu.model->config();
  EXPECT_EQ(c.act, Activation::GeluTanh);
  const std::vector<int32_t> toks = {5, 17, 42, 8, 77, 3, 60, 21};
  TestKv kv_g(c, 64, 1), kv_s(c, 64, 1);
  const auto got = run_one(*gelu.model, kv_g, pool, kv_g.alloc(), toks);
  const auto other = run_one(*silu.model, kv_s, pool, kv_s.alloc(), toks);
  const auto want = naive_forward(*gelu.file, c, toks);
  double norm = 0, err = 0, diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    norm += double(want[i]) * want[i];
    err += double(got[i] - want[i]) * (got[i] - want[i]);
    diff += double(other[i] - want[i]) * (other[i] - want[i]);
  }
  EXPECT_LT(std::sqrt(err / norm), 0.03) << "relative L2 error of logits";
  std::printf("relative L2 error %.5f, SwiGLU differs by %.5f\n", std::sqrt(err / norm),
              std::sqrt(diff / norm));
  EXPECT_GT(std::sqrt(diff / norm), 3 * std::sqrt(err / norm)) << "SwiGLU gave the same logits";
}

TEST(Model, ActivationNamesAndUnknownActivationIsALoadError) {
  EXPECT_EQ(parse_activation("silu"), Activation::SiLU);
  EXPECT_EQ(parse_activation("gelu_pytorch_tanh"), Activation::GeluTanh);
  EXPECT_EQ(parse_activation(to_string(Activation::GeluTanh)), Activation::GeluTanh);
  EXPECT_EQ(parse_activation("relu"), std::nullopt);
  TaskPool pool(1);
  TinyModelSpec spec;
  spec.activation = "relu";
  const std::string path = test::write_tiny_model(spec, "act_relu.gguf");
  auto file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(path));
  try {
    Model::load(file, {}, pool);
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("llama.feed_forward_activation = 'relu'"),
              std::string::npos)
        << e.what();
  }
}

TEST(Model, BatchingAndChunkingAreBitIdentical) {
  TaskPool pool(2);
  auto L = load({}, "batching.gguf", pool);
  const ModelConfig& c = L.model->config();
  TestKv kv(c, 256, 8);
  const std::vector<int32_t> a = {4, 9, 15, 23, 42, 7, 7, 1, 30};
  const std::vector<int32_t> b = {11, 12, 13};

  // Alone, in one pass.
  const auto alone_a = run_one(*L.model, kv, pool, kv.alloc(), a);
  const auto alone_b = run_one(*L.model, kv, pool, kv.alloc(), b);

  // Both in one batch, plus a third unrelated sequence mid-decode.
  const SeqId sa = kv.alloc(), sb = kv.alloc(), sc = kv.alloc();
  run_one(*L.model, kv, pool, sc, {70, 71, 72, 73});
  Batch batch;
  const std::vector<int32_t> c_next = {74};
  batch.entries = {
      {sa, a, LogitsMode::Last}, {sc, c_next, LogitsMode::None}, {sb, b, LogitsMode::Last}};
  StepOutput out;
  L.model->forward(batch, kv, out, pool);
  EXPECT_EQ(out.n_rows[1], 0);
  const auto ba = out.last(0), bb = out.last(2);
  EXPECT_TRUE(std::equal(ba.begin(), ba.end(), alone_a.begin()));
  EXPECT_TRUE(std::equal(bb.begin(), bb.end(), alone_b.begin()));

  // The same prompt in chunks of 4, 2, 3 and token by token.
  for (const std::vector<int> cuts : {std::vector<int>{4, 2, 3}, std::vector<int>(9, 1)}) {
    const SeqId s = kv.alloc();
    size_t off = 0;
    std::vector<float> last;
    for (int n : cuts) {
      last = run_one(*L.model, kv, pool, s, {a.begin() + long(off), a.begin() + long(off) + n});
      off += size_t(n);
    }
    EXPECT_EQ(kv.length(s), 9);
    EXPECT_TRUE(std::equal(last.begin(), last.end(), alone_a.begin()));
    kv.free(s);
  }
}

TEST(Model, AllLogitsModeMatchesLastForEachPrefix) {
  TaskPool pool(1);
  auto L = load({}, "all_logits.gguf", pool);
  const ModelConfig& c = L.model->config();
  TestKv kv(c, 256, 4);
  const std::vector<int32_t> toks = {3, 14, 15, 9, 26};
  Batch batch;
  batch.entries = {{kv.alloc(), toks, LogitsMode::All}};
  StepOutput all;
  L.model->forward(batch, kv, all, pool);
  ASSERT_EQ(all.n_rows[0], 5);
  for (size_t n = 1; n <= toks.size(); ++n) {
    const SeqId s = kv.alloc();
    const auto want = run_one(*L.model, kv, pool, s, {toks.begin(), toks.begin() + long(n)});
    kv.free(s);
    const auto row = all.row(all.first_row[0] + int(n) - 1);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), want.begin())) << "prefix " << n;
  }
}

TEST(Model, RejectsBadBatchesWithoutChangingState) {
  TaskPool pool(1);
  auto L = load({}, "bad_batch.gguf", pool);
  const ModelConfig& c = L.model->config();
  TestKv kv(c, 16, 2);
  const SeqId s = kv.alloc();
  StepOutput out;
  Batch bad_token;
  const std::vector<int32_t> t1 = {1, c.n_vocab};
  bad_token.entries = {{s, t1, LogitsMode::Last}};
  EXPECT_THROW(L.model->forward(bad_token, kv, out, pool), InvalidArgument);
  EXPECT_EQ(kv.length(s), 0);
  Batch too_long;
  const std::vector<int32_t> t2(17, 5);
  too_long.entries = {{s, t2, LogitsMode::Last}};
  EXPECT_THROW(L.model->forward(too_long, kv, out, pool), InvalidArgument);
  Batch dup;
  const std::vector<int32_t> t3 = {5};
  dup.entries = {{s, t3, LogitsMode::Last}, {s, t3, LogitsMode::Last}};
  EXPECT_THROW(L.model->forward(dup, kv, out, pool), InvalidArgument);
  EXPECT_EQ(kv.length(s), 0);
}

TEST(Model, MissingTensorIsAClearError) {
  TaskPool pool(1);
  TinyModelSpec spec;
  spec.arch = "qwen2";
  const std::string path = test::write_tiny_model(spec, "qwen_as_llama.gguf");
  // Same file but claiming an unknown architecture.
  gguf::GgufFile f = gguf::GgufFile::open(path);
  try {
    TinyModelSpec bad;
    bad.arch = "mamba";
    const std::string p2 = test::write_tiny_model(bad, "mamba.gguf");
    auto file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(p2));
    Model::load(file, {}, pool);
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported architecture 'mamba'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tern
