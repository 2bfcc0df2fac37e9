// Opens the real default model (SmolLM2-135M-Instruct, Q4_1) and checks what
// the rest of tern relies on. Skips when the model is not present.
#include <gtest/gtest.h>

#include <cmath>

#include "gguf_test_util.h"
#include "tern/gguf/gguf.h"
#include "tern/kernels/dequant.h"
#include "testutil.h"

namespace tern::gguf {
namespace {

class GgufModel : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = tern::test::default_model_path();
    if (!tern::test::file_exists(path_)) GTEST_SKIP() << "model not found: " << path_;
  }
  std::string path_;
};

TEST_F(GgufModel, MetadataAndTensorCounts) {
  const GgufFile f = GgufFile::open(path_);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.block_count"), 30u);
  EXPECT_EQ(f.get_u32("llama.embedding_length"), 576u);
  EXPECT_GT(f.get_f32("llama.attention.layer_norm_rms_epsilon"), 0.0f);
  const size_t n_vocab = f.array_length("tokenizer.ggml.tokens");
  EXPECT_EQ(n_vocab, 49152u);
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), n_vocab);
  if (f.has("tokenizer.ggml.merges")) {
    EXPECT_GT(f.get_string_array("tokenizer.ggml.merges").size(), 0u);
  }
  if (f.has("tokenizer.ggml.token_type")) {
    EXPECT_EQ(f.get_i32_array("tokenizer.ggml.token_type").size(), n_vocab);
  }
}

TEST_F(GgufModel, TokenEmbeddingIsQ8_0AndDequantizes) {
  const GgufFile f = GgufFile::open(path_);
  const TensorInfo& t = f.tensor("token_embd.weight");
  EXPECT_EQ(t.type, DType::Q8_0);
  EXPECT_EQ(t.dims, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(t.n_rows(), 49152);
  EXPECT_EQ(t.row_bytes(), 576u / 32 * 34);
  EXPECT_EQ(t.nbytes, t.row_bytes() * 49152);
  std::vector<float> row(576);
  kernels::dequantize_row(t.type, t.data, row.data(), 576);
  double norm = 0;
  for (float x : row) {
    ASSERT_TRUE(std::isfinite(x));
    norm += double(x) * x;
  }
  EXPECT_GT(norm, 0.0);
}

TEST_F(GgufModel, EveryTensorIsInBoundsAlignedAndDequantizable) {
  const GgufFile f = GgufFile::open(path_);
  const uint8_t* begin = f.file_bytes().data();
  const uint8_t* end = begin + f.file_bytes().size();
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_GE(t.data, begin + f.data_offset()) << t.name;
    EXPECT_LE(t.data + t.nbytes, end) << t.name;
    EXPECT_EQ((t.data - begin) % ptrdiff_t(f.alignment()), 0) << t.name;
    EXPECT_TRUE(kernels::can_dequantize(t.type)) << t.name << " " << dtype_name(t.type);
  }
  EXPECT_TRUE(std::isfinite(test::touch_all(f)));  // first and last row of every tensor
}

}  // namespace
}  // namespace tern::gguf
