#pragma once
// Every tensor a vision encoder + projector of a given config needs: name,
// shape, kind (which dtypes are acceptable) and where its view is bound in
// VisionWeights. Shared by the loader (validation) and the generator
// (mmproj_writer), so the two cannot drift apart.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/core/error.h"
#include "tern/vision/mmproj.h"

namespace tern::vision {

enum class TensorKind {
  Matrix,     // linear weight: any type tern can dequantize (F32, F16, BF16, Q8_0, Q4_*, ...)
  Vector,     // norm weight, bias, class token: F32 or F16
  Embedding,  // patch conv kernel, position table: F32 or F16
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order, dims[0] fastest
  TensorKind kind = TensorKind::Matrix;
  int layer = -1;                                // >= 0: a ViT block's tensor
  Tensor VisionWeights::*global = nullptr;       // binding when layer < 0
  Tensor VisionLayerWeights::*member = nullptr;  // binding when layer >= 0
};

// The tensors of one pre-LN transformer block (ViT or Whisper), named after
// "<prefix>.blk.<il>.": D -> F -> D. k_bias false: Whisper's K has none.
struct BlockTensor {
  std::string suffix;  // "ln1.weight", "attn_q.bias", ...
  std::vector<int64_t> dims;
  TensorKind kind = TensorKind::Matrix;
  Tensor VisionLayerWeights::*member = nullptr;
};
std::vector<BlockTensor> block_tensors(int64_t D, int64_t F, bool ffn_swapped, bool k_bias);

// All tensors `c` needs, in the order the generator writes them. Optional
// tensors appear only when the config's has_* flag says the file has them.
std::vector<TensorSpec> vision_tensor_specs(const VisionConfig& c);

// Random values with the statistics of trained weights, roughly: a weight
// with fan_in > 0 inputs per output ~ U(+-sqrt(3/fan_in)) (unit output
// variance), norm weights (names with "ln" or "norm") near 1, biases and
// embeddings small. For the generators of test files.
std::vector<float> random_tensor_values(const std::string& name, int64_t fan_in,
                                        const std::vector<int64_t>& dims, std::mt19937& rng);

bool kind_accepts(TensorKind k, DType t);
std::string_view kind_rule(TensorKind k);  // which types the kind accepts, in words

std::string shape_text(const std::vector<int64_t>& dims);  // "[a, b]"

// Throws FormatError "<path>: <what>".
[[noreturn]] void fail(const gguf::GgufFile& f, const std::string& what);
// A required integer key's value, refused (FormatError) unless in [1, 2^24].
int positive(const gguf::GgufFile& f, const std::string& key);

// Checks every spec's tensor in f (present: need(name) returns it or
// throws; its shape; its type for the kind) and binds its view into w:
// w.*global, or w.layers[layer].*member. Throws FormatError naming the tensor.
template <class Spec, class Weights, class Need>
void bind_tensors(const gguf::GgufFile& f, const std::vector<Spec>& specs, Weights& w, Need need) {
  for (const Spec& s : specs) {
    const gguf::TensorInfo& t = need(s.name);
    if (t.dims != s.dims)
      throw FormatError(f.path() + ": tensor '" + s.name + "' has shape " + shape_text(t.dims) +
                        ", expected " + shape_text(s.dims));
    if (!kind_accepts(s.kind, t.type))
      throw FormatError(f.path() + ": tensor '" + s.name + "' has type " +
                        std::string(dtype_name(t.type)) + ", not supported there (" +
                        std::string(kind_rule(s.kind)) + ")");
    if (s.layer >= 0)
      w.layers[size_t(s.layer)].*s.member = &t;
    else
      w.*s.global = &t;
  }
}

}  // namespace tern::vision
