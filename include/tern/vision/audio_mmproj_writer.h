#pragma once
// Writes seeded random-weight audio mmproj GGUF files in llama.cpp's real
// format (the keys and tensor names its converter writes for Ultravox,
// Qwen2-Audio and Voxtral), for tests and benchmarks without downloads. The
// weights are noise: the embeddings mean nothing.
//
//   tiny: Whisper-shaped, 2 layers x 64, 4 heads (30 s chunks as always)
//   real: Whisper-large-v3's encoder, 32 layers x 1280, 20 heads, 128 mel,
//     ultravox  stack 8, SwiGLU 10240 -> 2x4096, out 2048 (Llama 3.2 1B)
//     qwen2a    pool 2, fc 1280 -> 4096 (Qwen2-Audio-7B)
//     voxtral   stack 4, 5120 -> 3072 -> 3072 (Voxtral Mini 3B)
#include <cstdint>
#include <string>

#include "tern/core/dtype.h"
#include "tern/gguf/gguf_writer.h"
#include "tern/vision/audio_mmproj.h"
#include "tern/vision/mmproj_writer.h"  // MmprojShape, TensorEdit

namespace tern::vision {

struct AudioMmprojSpec {
  AudioConfig config;              // every field, including d_out
  DType matrix_type = DType::F16;  // linear weights (F16 where a row does not fit the block)
  DType conv_type = DType::F16;    // the conv kernels (llama.cpp's converter forces F16)
  uint32_t seed = 1;
  std::string name = "tern-random-audio-mmproj";
  TensorEdit edit;  // optional: change dims or leave tensors out
};

AudioMmprojSpec audio_mmproj_preset(AudioProjector type, MmprojShape shape);

gguf::GgufWriter build_audio_mmproj(const AudioMmprojSpec& spec);
void write_audio_mmproj(const AudioMmprojSpec& spec, const std::string& path);

}  // namespace tern::vision
