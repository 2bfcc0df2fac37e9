#pragma once
// Every tensor a vision encoder + projector of a given config needs: name,
// shape, kind (which dtypes are acceptable) and where its view is bound in
// VisionWeights. Shared by the loader (validation) and the generator
// (mmproj_writer), so the two cannot drift apart.
#include <cstdint>
#include <string>
#include <vector>

#include "tern/core/dtype.h"
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

// All tensors `c` needs, in the order the generator writes them. Optional
// tensors appear only when the config's has_* flag says the file has them.
std::vector<TensorSpec> vision_tensor_specs(const VisionConfig& c);

bool kind_accepts(TensorKind k, DType t);
std::string_view kind_rule(TensorKind k);  // which types the kind accepts, in words

}  // namespace tern::vision
