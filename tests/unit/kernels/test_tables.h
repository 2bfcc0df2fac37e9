#pragma once
// The fast kernel tables this machine can run, for tests that compare each of
// them against the scalar reference, plus random-data helpers.
#include <cstdint>
#include <random>
#include <vector>

#include "../../../src/kernels/dispatch.h"

namespace tern::kernels::test {

// Every table but scalar that this build and CPU can run (x86 or ARM alike).
inline std::vector<const KernelTable*> fast_tables() {
  std::vector<const KernelTable*> v;
  for (Isa isa : available_isas()) {
    if (isa != Isa::Scalar) v.push_back(kernel_table(isa));
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
