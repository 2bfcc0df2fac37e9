// tern gen-lora's adapters: random low-rank A and B for a base model's linear
// layers, in llama.cpp's GGUF adapter format, sized so that the low-rank term
// is a set fraction of the base layer's output (as a fine-tune's would be).
#include <cmath>

#include "tern/core/error.h"
#include "tern/core/sha256.h"
#include "tern/gguf/gguf.h"
#include "tern/kernels/dequant.h"
#include "tern/model/gen_arch.h"
#include "tern/model/lora.h"

namespace tern {
namespace {

// RMS of a weight's first rows (enough to size the update against).
double weight_rms(const gguf::TensorInfo& t) {
  const int64_t n_in = t.dims[0], rows = std::min<int64_t>(t.n_rows(), 64);
  std::vector<float> row(static_cast<size_t>(n_in));
  double ss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    kernels::dequantize_row(t.type, t.data + size_t(r) * t.row_bytes(), row.data(), n_in);
    for (float v : row) ss += double(v) * v;
  }
  return std::sqrt(ss / double(rows * n_in));
}

}  // namespace

GenArchResult generate_lora(const gguf::GgufFile& base, const GenLoraOptions& o) {
  if (o.rank < 1 || o.rank > kMaxLoraRank) {
    throw InvalidArgument("--rank must be 1.." + std::to_string(kMaxLoraRank));
  }
  GenArchResult res;
  gguf::GgufWriter& w = res.writer;
  const std::string arch = base.get_string("general.architecture");
  const float alpha = o.alpha > 0 ? o.alpha : 2.0f * float(o.rank);
  const float s = alpha / float(o.rank);
  w.set_string("general.architecture", arch);
  w.set_string("general.type", "adapter");
  w.set_string("general.name", "tern-gen-lora");
  w.set_string("adapter.type", "lora");
  w.set_f32("adapter.lora.alpha", alpha);
  SeededNormal rng(o.seed);
  Sha256 digest;
  const int n_layers = int(base.get_int(arch + ".block_count"));
  for (int l = 0; l < n_layers; ++l) {
    for (LoraSlot slot : o.slots) {
      const std::string name =
          "blk." + std::to_string(l) + "." + lora_slot_tensor(slot) + ".weight";
      const gguf::TensorInfo& t = base.tensor(name);
      const int64_t n_in = t.dims[0], n_out = t.dims[1];
      // A x has entries of x's size; B's are set so that s B (A x) is
      // `strength` times W x in RMS.
      const double sigma_b = o.strength * weight_rms(t) * std::sqrt(double(n_in)) /
                             (double(s) * std::sqrt(double(o.rank)));
      auto a = rng.fill(size_t(o.rank * n_in), float(1.0 / std::sqrt(double(n_in))));
      auto b = rng.fill(size_t(n_out * o.rank), float(sigma_b));
      for (auto* part : {&a, &b}) digest.update(part->data(), part->size() * sizeof(float));
      w.add_tensor_f32(name + ".lora_a", {n_in, o.rank}, a);
      w.add_tensor_f32(name + ".lora_b", {o.rank, n_out}, b);
    }
  }
  res.weights_sha256 = to_hex(digest.finish());
  return res;
}

}  // namespace tern
