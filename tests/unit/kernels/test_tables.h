#pragma once
// The fast kernel tables this machine can run, for tests that compare each of
// them against the scalar reference, plus random-data helpers.
#include <gtest/gtest.h>

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

// Rows [1, rows - 1) x tiles [1, n_tiles) of k's product write exactly
// those outputs of `full` (the whole product, (rows, w.n_out)), nothing else.
inline void expect_subrange_writes_only_it(const KernelTable& k, const PackedMatrix& w,
                                           const QuantizedActs& qa, const std::vector<float>& full,
                                           int rows) {
  if (rows <= 2 || w.n_tiles() <= 1) return;
  std::vector<float> part(full.size(), -3.0f);
  k.gemm_tiles(w, qa, part.data(), 1, rows - 1, 1, w.n_tiles());
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < w.n_out; ++o) {
      const bool inside = r >= 1 && r < rows - 1 && o >= kTileRows;
      const size_t i = size_t(r) * w.n_out + o;
      if (inside) {
        ASSERT_EQ(part[i], full[i]) << k.isa << " r " << r << " o " << o;
      } else {
        ASSERT_EQ(part[i], -3.0f) << k.isa << " wrote outside its range: r " << r << " o " << o;
      }
    }
  }
}

}  // namespace tern::kernels::test
