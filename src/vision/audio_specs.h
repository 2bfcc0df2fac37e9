#pragma once
// Every tensor an audio encoder + projector of a given config needs (name,
// GGUF dims, kind, binding in AudioWeights): shared by the loader and the
// generator (mmproj_writer) so the two cannot drift apart.
#include <string>
#include <vector>

#include "tensor_specs.h"
#include "tern/vision/audio_mmproj.h"

namespace tern::vision {

struct AudioTensorSpec {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order, dims[0] fastest
  TensorKind kind = TensorKind::Matrix;
  int layer = -1;                                // >= 0: an encoder block's tensor
  Tensor AudioWeights::*global = nullptr;        // binding when layer < 0
  Tensor VisionLayerWeights::*member = nullptr;  // binding when layer >= 0
};

// In the order the generator writes them.
std::vector<AudioTensorSpec> audio_tensor_specs(const AudioConfig& c);

}  // namespace tern::vision
