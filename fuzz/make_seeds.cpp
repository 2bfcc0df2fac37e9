// Writes a seed corpus for fuzz_gguf: a few tiny valid GGUF files that
// between them use every metadata type, every tensor type tern knows,
// v2 and v3 headers, a custom alignment and nested arrays.
// Usage: fuzz_gguf_seeds <output-dir>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/gguf/gguf_writer.h"
#include "tern/kernels/dequant.h"

namespace {

using tern::DType;
using tern::gguf::GgufWriter;
using tern::kernels::quantize_ref;

std::vector<float> wave(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.7f * float(i)) * 2.0f;
  return v;
}

void save(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size())
    throw tern::IoError(path + ": write failed");
  std::fclose(f);
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
}

// Metadata of every scalar and array type, plus quantized float tensors.
std::vector<uint8_t> metadata_seed() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u8("u8", 1);
  w.set_i8("i8", -1);
  w.set_u16("u16", 2);
  w.set_i16("i16", -2);
  w.set_u32("llama.block_count", 2);
  w.set_i32("i32", -3);
  w.set_u64("u64", 4);
  w.set_i64("i64", -4);
  w.set_f32("f32", 0.5f);
  w.set_f64("f64", 0.25);
  w.set_bool("bool", true);
  w.set_string_array("tokenizer.ggml.tokens", {"<s>", "a", ""});
  w.set_i32_array("tokenizer.ggml.token_type", {3, 1, 1});
  w.set_f32_array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.0f});
  w.set_array<uint8_t>("u8a", {1, 2});
  w.set_array<double>("f64a", {1.0});
  w.set_array<bool>("boola", {true, false});
  w.set_array<int64_t>("i64a", {-1});
  const auto v = wave(64);
  w.add_tensor("token_embd.weight", DType::Q8_0, {32, 2}, quantize_ref(DType::Q8_0, v));
  w.add_tensor("blk.0.attn_q.weight", DType::Q4_1, {64}, quantize_ref(DType::Q4_1, v));
  w.add_tensor_f32("output_norm.weight", {8}, std::span<const float>(v.data(), 8));
  return w.to_bytes();
}

// One small tensor of every known type (raw bytes), alignment 16.
std::vector<uint8_t> tensor_types_seed() {
  GgufWriter w;
  w.set_u32("general.alignment", 16);
  for (uint32_t raw = 0; raw < 40; ++raw) {
    const auto tr = tern::dtype_traits(raw);
    if (!tr) continue;
    std::vector<uint8_t> data(tr->block_bytes);
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 37 + raw);
    if (tr->block_elems > 1 || raw == uint32_t(DType::F16)) {
      data[0] = 0x00;  // keep fp16 scales in the first two bytes finite
      data[1] = 0x3c;
    }
    w.add_tensor("t." + std::string(tr->name), DType(raw), {int64_t(tr->block_elems)}, data);
  }
  return w.to_bytes();
}

std::vector<uint8_t> float_types_seed() {
  GgufWriter w;
  const auto v = wave(32 * 3);
  for (DType t : {DType::F16, DType::BF16, DType::Q4_0, DType::Q5_0, DType::Q5_1}) {
    w.add_tensor(std::string(tern::dtype_name(t)), t, {32, 3}, quantize_ref(t, v));
  }
  return w.to_bytes();
}

// Hand-made: a v2 header and an array of arrays (the writer does not nest).
std::vector<uint8_t> nested_seed() {
  std::vector<uint8_t> b;
  auto put32 = [&](uint32_t x) {
    b.insert(b.end(), reinterpret_cast<uint8_t*>(&x), reinterpret_cast<uint8_t*>(&x) + 4);
  };
  auto put64 = [&](uint64_t x) {
    b.insert(b.end(), reinterpret_cast<uint8_t*>(&x), reinterpret_cast<uint8_t*>(&x) + 8);
  };
  put32(0x46554747);
  put32(2);
  put64(0);
  put64(1);
  put64(1);
  b.push_back('n');
  put32(9);
  put32(9);
  put64(2);  // ARRAY of 2 ARRAYs
  put32(4);
  put64(1);
  put32(7);  //   [u32 7]
  put32(8);
  put64(1);
  put64(2);
  b.push_back('h');
  b.push_back('i');  //   ["hi"]
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output-dir>\n", argv[0]);
    return 2;
  }
  try {
    const std::string dir = argv[1];
    std::filesystem::create_directories(dir);
    save(dir, "metadata.gguf", metadata_seed());
    save(dir, "tensor_types.gguf", tensor_types_seed());
    save(dir, "float_types.gguf", float_types_seed());
    save(dir, "nested_v2.gguf", nested_seed());
    save(dir, "empty.gguf", GgufWriter().to_bytes());
  } catch (const tern::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
