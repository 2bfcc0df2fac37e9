// --weights f16 / bf16 on generated models with 16-bit float weights: the
// float tiles (fp32 activations, no int8 anywhere in the linear layers) give
// logits much closer to an fp32 forward pass of the same weights than the
// default int8 repacking (W8A8), and the packed size is 2 bytes a weight.
#include <gtest/gtest.h>

#include <cmath>

#include "naive_forward.h"
#include "tern/core/task_pool.h"
#include "tern/kv/paged_kv.h"
#include "tern/model/model.h"
#include "testutil.h"
#include "tiny_model.h"

namespace tern {
namespace {

using kernels::WeightFormat;
using test::TinyModelSpec;
using namespace reference;

struct Outcome {
  std::vector<float> logits;
  size_t packed_bytes = 0;
};

Outcome run(const std::shared_ptr<const gguf::GgufFile>& file, const LoadOptions& opts,
            const std::vector<int32_t>& toks, TaskPool& pool) {
  auto m = Model::load(file, opts, pool);
  TestKv kv(m->config(), 256, 1);
  Batch b;
  b.entries.push_back({kv.alloc(), toks, LogitsMode::All});
  StepOutput out;
  m->forward(b, kv, out, pool);
  return {out.logits, m->packed_bytes()};
}

// RMS of (got - want) over RMS of want, across every position's logits.
double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double norm = 0, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    norm += double(want[i]) * want[i];
    err += double(got[i] - want[i]) * (got[i] - want[i]);
  }
  return std::sqrt(err / norm);
}

// Weights of the tiny model's matrices (7 a layer and the tied head).
size_t n_weights(const TinyModelSpec& s) {
  const int hd = s.d_model / s.n_heads, kvd = s.n_kv_heads * hd;
  const size_t layer = size_t(s.d_model) * (2 * s.d_model + 2 * kvd + 3 * s.d_ff);
  return layer * size_t(s.n_layers) + size_t(s.n_vocab) * size_t(s.d_model);
}

class FloatWeights : public ::testing::TestWithParam<DType> {};

TEST_P(FloatWeights, CloserToTheFp32ForwardThanInt8) {
  TaskPool pool(2);
  TinyModelSpec spec;
  spec.weight_type = GetParam();
  spec.embd_type = GetParam();  // tied: the head too
  const std::string path =
      test::write_tiny_model(spec, "float_" + std::string(dtype_name(GetParam())) + ".gguf");
  auto file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(path));
  const std::vector<int32_t> toks = {5, 17, 42, 8, 77, 3, 60, 21, 9, 33, 12, 70, 1, 64};
  LoadOptions f16;
  f16.float_format = WeightFormat::F16;
  const Outcome flt = run(file, f16, toks, pool);
  const Outcome int8 = run(file, {}, toks, pool);  // auto: int8 tiles for float sources
  // naive_forward takes the last position; the engine gave all of them.
  const ModelConfig c = ModelConfig::from_gguf(*file);
  std::vector<float> want;
  for (size_t n = 1; n <= toks.size(); ++n) {
    const auto row =
        naive_forward(*file, c, std::vector<int32_t>(toks.begin(), toks.begin() + long(n)));
    want.insert(want.end(), row.begin(), row.end());
  }
  const double e_flt = rel_error(flt.logits, want), e_int8 = rel_error(int8.logits, want);
  std::printf("%s: relative error of logits: float tiles %.2e, int8 %.2e\n",
              std::string(dtype_name(GetParam())).c_str(), e_flt, e_int8);
  // What is left with float tiles is the f16 KV cache and fp32 sums.
  EXPECT_LT(e_flt, 1e-3);
  EXPECT_LT(e_flt * 20, e_int8);  // measured: ~70x
  // (F32 sources are rounded to fp16, 11 bits: still far under int8's error.)
  const size_t want_bytes = 2 * n_weights(spec);
  EXPECT_EQ(flt.packed_bytes, want_bytes) << "2 bytes a weight";
  EXPECT_GT(int8.packed_bytes, want_bytes / 2);  // 1.0625 bytes a weight
  EXPECT_LT(int8.packed_bytes, want_bytes * 6 / 10);
}

INSTANTIATE_TEST_SUITE_P(Sources, FloatWeights,
                         ::testing::Values(DType::F16, DType::BF16, DType::F32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// --weights bf16 on an F16 file keeps F16 (fp16 is not a subset of bf16):
// the same logits as --weights f16, bit for bit.
TEST(FloatWeightsPolicy, Bf16OnAnF16FileKeepsF16) {
  TaskPool pool(1);
  TinyModelSpec spec;
  spec.weight_type = DType::F16;
  spec.embd_type = DType::F16;
  const std::string path = test::write_tiny_model(spec, "float_policy_f16.gguf");
  auto file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(path));
  const std::vector<int32_t> toks = {5, 17, 42, 8};
  LoadOptions f16, bf16;
  f16.float_format = WeightFormat::F16;
  bf16.float_format = WeightFormat::Bf16;
  EXPECT_EQ(run(file, f16, toks, pool).logits, run(file, bf16, toks, pool).logits);
}

// Quantized sources keep their own formats under --weights f16: the same
// logits as auto.
TEST(FloatWeightsPolicy, QuantizedSourcesAreUntouched) {
  TaskPool pool(1);
  TinyModelSpec spec;  // Q4_1 weights, Q8_0 embeddings
  const std::string path = test::write_tiny_model(spec, "float_policy_q4.gguf");
  auto file = std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(path));
  const std::vector<int32_t> toks = {5, 17, 42, 8};
  LoadOptions f16;
  f16.float_format = WeightFormat::F16;
  const Outcome a = run(file, {}, toks, pool), b = run(file, f16, toks, pool);
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.packed_bytes, b.packed_bytes);
}

}  // namespace
}  // namespace tern
