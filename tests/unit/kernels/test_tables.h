#pragma once
// The fast kernel tables this machine can run, for tests that compare each of
// them against the scalar reference, plus random-data helpers.
#include <cstdint>
#include <random>
#include <vector>

#include "../../../src/kernels/dispatch.h"
#include "tern/core/cpu.h"

namespace tern::kernels::test {

inline std::vector<const KernelTable*> fast_tables() {
  std::vector<const KernelTable*> v;
  const auto& cpu = cpu_features();
  const bool avx2 = cpu.avx2 && cpu.fma && cpu.f16c;
  if (avx2 && avx2_kernels()) v.push_back(avx2_kernels());
  if (avx2 && cpu.avxvnni && avxvnni_kernels()) v.push_back(avxvnni_kernels());
  if (avx2 && cpu.avx512f && cpu.avx512bw && cpu.avx512vnni && avx512_kernels()) {
    v.push_back(avx512_kernels());
  }
  return v;
}

// n floats, normal(0, scale), placed `offset` floats past a 64-byte boundary
// (offset 1 makes every vector load unaligned).
class Floats {
 public:
  Floats(int n, int offset, std::mt19937& rng, float scale = 1.0f)
      : buf_(size_t(n + offset + 16)), off_(offset), n_(n) {
    std::normal_distribution<float> dist(0.0f, scale);
    for (int i = 0; i < n; ++i) data()[i] = dist(rng);
  }
  float* data() { return buf_.data() + off_; }
  int size() const { return n_; }

 private:
  std::vector<float> buf_;
  int off_, n_;
};

}  // namespace tern::kernels::test
