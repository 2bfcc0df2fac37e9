// A reranker's classification head (rank_head.h): loading and applying it.
#include "tern/model/rank_head.h"

#include <algorithm>
#include <cmath>

#include "tern/core/error.h"
#include "tern/gguf/gguf.h"
#include "tern/kernels/dequant.h"

namespace tern {
namespace {

// y (n_out) = W (n_out, n_in) x (n_in) + b, in double.
std::vector<float> affine(const std::vector<float>& w, const std::vector<float>& b,
                          std::span<const float> x, int n_out) {
  const size_t n_in = x.size();
  std::vector<float> y(static_cast<size_t>(n_out));
  for (size_t o = 0; o < y.size(); ++o) {
    double s = b.empty() ? 0.0 : double(b[o]);
    for (size_t i = 0; i < n_in; ++i) s += double(w[o * n_in + i]) * double(x[i]);
    y[o] = float(s);
  }
  return y;
}

// A tensor of `dims` (row length first), every row dequantized to fp32.
std::vector<float> load_tensor(const gguf::GgufFile& f, const std::string& name,
                               const std::vector<int64_t>& dims) {
  const gguf::TensorInfo& t = f.tensor(name);
  if (t.dims != dims || !kernels::can_dequantize(t.type)) {
    std::string want;
    for (int64_t d : dims) want += (want.empty() ? "" : ", ") + std::to_string(d);
    throw FormatError(f.path() + ": tensor '" + name + "' must be [" + want +
                      "] of a type tern reads (it is " + dtype_label(t.type) + ")");
  }
  const int64_t row = t.dims[0], rows = t.n_rows();
  std::vector<float> v(size_t(row * rows));
  for (int64_t r = 0; r < rows; ++r)
    kernels::dequantize_row(t.type, t.data + size_t(r) * t.row_bytes(), v.data() + r * row, row);
  return v;
}

}  // namespace

RankHead::RankHead(RankHeadWeights w) : w_(std::move(w)) {
  const size_t d_in = size_t(std::max(0, w_.d_in)), n_out = size_t(std::max(0, w_.n_out));
  bool ok = d_in > 0 && n_out > 0 && w_.dense.size() % d_in == 0;
  const size_t d_mid = w_.dense.empty() ? d_in : w_.dense.size() / d_in;
  ok = ok && (w_.dense_b.empty() || (!w_.dense.empty() && w_.dense_b.size() == d_mid));
  ok = ok && (w_.norm.empty() || (!w_.dense.empty() && w_.norm.size() == d_mid));
  ok = ok && (w_.out.empty() ? n_out == d_mid : w_.out.size() == n_out * d_mid);
  ok = ok && (w_.out_b.empty() || (!w_.out.empty() && w_.out_b.size() == n_out));
  ok = ok && (w_.labels.empty() || w_.labels.size() == n_out);
  ok = ok && (w_.rows == Pooling::Last || w_.rows == Pooling::Cls || w_.rows == Pooling::Mean);
  if (!ok) throw InvalidArgument("RankHead: inconsistent shapes");
}

std::optional<RankHead> RankHead::from_gguf(const gguf::GgufFile& f, const std::string& arch,
                                            bool causal) {
  const bool dense = f.find_tensor("cls.weight") != nullptr;
  const bool out = f.find_tensor("cls.output.weight") != nullptr;
  if (!dense && !out) return std::nullopt;
  const std::string p = arch + ".";
  RankHeadWeights w;
  w.d_in = int(f.get_int(p + "embedding_length"));
  if (const std::string k = p + "classifier.output_labels"; f.has(k))
    w.labels = f.get_string_array(k);
  w.n_out = w.labels.empty() ? 1 : int(w.labels.size());
  // llama.cpp: the last row for a causal model, else the first, or the mean
  // when classifier.pooling_type says so (ModernBERT's classifier_pooling).
  w.rows = causal                                                                 ? Pooling::Last
           : f.get_int_or(p + "classifier.pooling_type", 0) == int(Pooling::Mean) ? Pooling::Mean
                                                                                  : Pooling::Cls;
  int d_mid = w.d_in;
  if (dense) {
    const gguf::TensorInfo& t = f.tensor("cls.weight");
    d_mid = t.dims.size() == 2 ? int(t.dims[1]) : 0;
    w.dense = load_tensor(f, "cls.weight", {w.d_in, d_mid});
    if (f.find_tensor("cls.bias")) w.dense_b = load_tensor(f, "cls.bias", {d_mid});
    w.gelu = arch == "modern-bert";
    if (f.find_tensor("cls.norm.weight")) {
      w.norm = load_tensor(f, "cls.norm.weight", {d_mid});
      w.norm_eps = f.get_f32_or(p + "attention.layer_norm_epsilon", 1e-5f);
    }
  }
  if (out) {
    w.out = load_tensor(f, "cls.output.weight", {d_mid, w.n_out});
    if (f.find_tensor("cls.output.bias")) w.out_b = load_tensor(f, "cls.output.bias", {w.n_out});
  } else if (w.n_out != d_mid) {
    throw FormatError(f.path() +
                      ": a head without cls.output.weight must have as many outputs as "
                      "cls.weight (" +
                      std::to_string(d_mid) + ")");
  }
  // llama.cpp applies softmax for these two architectures only: the
  // converter writes their yes/no rows of the LM head as cls.output.
  w.softmax = arch == "qwen3" || arch == "qwen3vl";
  return RankHead(std::move(w));
}

std::vector<float> RankHead::apply(std::span<const float> pooled) const {
  if (pooled.size() != size_t(w_.d_in))
    throw InvalidArgument("RankHead: pooled row of wrong width");
  std::vector<float> x(pooled.begin(), pooled.end());
  if (!w_.dense.empty()) {
    const int d_mid = int(w_.dense.size() / x.size());
    x = affine(w_.dense, w_.dense_b, x, d_mid);
    for (float& v : x) {
      const double z = v;
      v = w_.gelu
              ? float(0.5 * z * (1 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z))))
              : float(std::tanh(z));
    }
    if (!w_.norm.empty()) {  // LayerNorm without bias, then the scale
      double mean = 0, var = 0;
      for (float v : x) mean += v;
      mean /= double(x.size());
      for (float v : x) var += (v - mean) * (v - mean);
      const double inv = 1.0 / std::sqrt(var / double(x.size()) + w_.norm_eps);
      for (size_t i = 0; i < x.size(); ++i) x[i] = float((x[i] - mean) * inv * w_.norm[i]);
    }
  }
  std::vector<float> y = w_.out.empty() ? x : affine(w_.out, w_.out_b, x, w_.n_out);
  if (w_.softmax) {
    const float m = *std::max_element(y.begin(), y.end());
    double sum = 0;
    for (float& v : y) sum += (v = std::exp(v - m));
    for (float& v : y) v = float(v / sum);
  }
  return y;
}

}  // namespace tern
