#pragma once
// Private to model/: how the generators add seeded tensors to a file. Each
// tensor's name, type, dims and bytes are digested in file order (the
// weights_sha256 that ties a fixture to the file the peer ran).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/core/sha256.h"
#include "tern/gguf/gguf_writer.h"
#include "tern/kernels/dequant.h"
#include "tern/model/gen_arch.h"
#include "tern/model/quantize_model.h"

namespace tern {

class GenTensors {
 public:
  GenTensors(gguf::GgufWriter& w, uint64_t seed) : w_(w), rng_(seed) {}

  SeededNormal& rng() { return rng_; }

  // v quantized to `type`, stored with GGUF dims (innermost first).
  void add(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v,
           DType type) {
    auto bytes = kernels::quantize_ref(type, v);
    digest_.update(name).update(&type, sizeof(type));
    for (int64_t x : dims) digest_.update(&x, sizeof(x));
    digest_.update(bytes.data(), bytes.size());
    w_.add_tensor(name, type, std::move(dims), std::move(bytes));
  }
  // W (n_out, n_in) with N(0, gain^2 / n_in) entries: unit-size outputs for
  // unit-size inputs when gain is 1.
  // A type whose block does not divide n_in falls back as `tern quantize`
  // does (fallback_type).
  void matrix(const std::string& name, int n_out, int n_in, float gain, DType type) {
    while (n_in % int(dtype_traits(type).block_elems) != 0) type = fallback_type(type);
    add(name, {n_in, n_out}, rng_.fill(size_t(n_out) * n_in, gain / std::sqrt(float(n_in))), type);
  }
  std::string sha256() { return to_hex(digest_.finish()); }

 private:
  gguf::GgufWriter& w_;
  SeededNormal rng_;
  Sha256 digest_;
};

}  // namespace tern
