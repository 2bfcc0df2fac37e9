#pragma once
// The classification head of a reranker (GGUF pooling_type 4, llama.cpp's
// LLAMA_POOLING_TYPE_RANK), on the pooled final hidden state of a
// query-document prompt. As llama.cpp's build_pooling reads it:
//
//   x   = the pooled row (d_in): the last position for a causal model (a
//         Qwen3-Reranker style decoder), else the first (CLS) or, when
//         <arch>.classifier.pooling_type is 1, the mean of every position
//   x   = act(cls.weight x + cls.bias)           optional dense (d_mid, d_in):
//                                                tanh; gelu for modern-bert
//   x   = layer_norm(x) * cls.norm               optional (modern-bert)
//   y   = cls.output.weight x + cls.output.bias  (n_out, d_mid), bias optional
//   y   = softmax(y)                             qwen3 / qwen3vl only (the two
//                                                rows are the lm_head's "yes"
//                                                and "no": y[0] = P(yes))
//
// n_out is the number of <arch>.classifier.output_labels (1 without them).
// The relevance score is y[0], as llama.cpp's server reports it. The weights
// are small (n_out rows, plus one square matrix for BERT-style heads), so
// they are dequantized to fp32 and applied exactly, off the int8 path.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tern/model/pooling.h"

namespace tern {

namespace gguf {
class GgufFile;
}

struct RankHeadWeights {
  Pooling rows = Pooling::Last;       // which rows feed the head: Last, Cls or Mean
  int d_in = 0;                       // the pooled width (d_model)
  std::vector<float> dense, dense_b;  // (d_mid, d_in), (d_mid) or empty: no dense layer
  bool gelu = false;                  // the dense layer's activation: gelu, else tanh
  std::vector<float> norm;            // (d_mid) or empty: no head norm
  float norm_eps = 1e-5f;
  std::vector<float> out, out_b;  // (n_out, d_mid), (n_out) or empty
  int n_out = 1;
  bool softmax = false;
  std::vector<std::string> labels;  // <arch>.classifier.output_labels ({} when absent)
};

class RankHead {
 public:
  explicit RankHead(RankHeadWeights w);  // throws InvalidArgument on inconsistent shapes

  // The head a file carries: nullopt when it has neither cls.weight nor
  // cls.output.weight. `causal`: the architecture attends causally (the last
  // row feeds the head, as llama.cpp does for RANK with causal attention).
  // Throws FormatError naming the file and tensor on a bad shape or type.
  static std::optional<RankHead> from_gguf(const gguf::GgufFile& f, const std::string& arch,
                                           bool causal);

  Pooling rows() const { return w_.rows; }
  int d_in() const { return w_.d_in; }
  int n_out() const { return w_.n_out; }
  const std::vector<std::string>& labels() const { return w_.labels; }

  // The head's outputs (n_out) for a pooled row (d_in); score() is the first.
  std::vector<float> apply(std::span<const float> pooled) const;
  float score(std::span<const float> pooled) const { return apply(pooled)[0]; }

 private:
  RankHeadWeights w_;
};

}  // namespace tern
