#pragma once
// Writes seeded random-weight mmproj GGUF files in llama.cpp's real format:
// the same metadata keys and tensor names a converted model has, so the
// loader, and later the encoder, can be tested and benchmarked without
// downloading anything. Tiny shapes for unit tests; real shapes for timing:
//
//   idefics3 real: SmolVLM-256M's SigLIP-B/16, 512x512, 12 layers x 768,
//                  pixel shuffle 4 -> 64 tokens of 576
//   gemma3   real: Gemma 3's SigLIP so400m/14, 896x896, 27 layers x 1152,
//                  pool 4 -> 256 tokens of 640 (the 270M text model's width)
//   mlp      real: LLaVA-1.5's CLIP ViT-L/14-336, 23 layers x 1024 (the 24th
//                  dropped by the converter: the "-2" hidden state), class
//                  token, 2-layer MLP 1024 -> 4096 -> 4096, 576 tokens
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/gguf/gguf_writer.h"
#include "tern/vision/vision_config.h"

namespace tern::vision {

enum class MmprojShape { Tiny, Real };

// Called for each tensor before it is written: may change its dims, or
// return false to leave it out (tests corrupt files with it).
using TensorEdit = std::function<bool(const std::string& name, std::vector<int64_t>& dims)>;

struct MmprojSpec {
  VisionConfig config;             // every field, including has_* and d_out
  DType matrix_type = DType::F16;  // linear weights (F16 where a row does not fit the block)
  DType embed_type = DType::F16;   // patch kernel and position table: F32 or F16
  uint32_t seed = 1;
  std::string name = "tern-random-mmproj";  // general.name
  TensorEdit edit;                          // optional
};

MmprojSpec mmproj_preset(ProjectorType type, MmprojShape shape);

// The file as a writer (metadata set, tensors added): callers may still
// override keys before to_bytes()/write().
gguf::GgufWriter build_mmproj(const MmprojSpec& spec);
void write_mmproj(const MmprojSpec& spec, const std::string& path);

}  // namespace tern::vision
