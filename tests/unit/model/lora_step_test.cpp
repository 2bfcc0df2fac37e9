// LoraStep (the int8 fast path of the adapters' terms) against the exact
// low-rank term s B (A x), computed in double from the adapter file's fp32 A
// and B and the unquantized input, with an error bound derived from the
// rounding each stage does (no guessed epsilon):
//   x  -> int8 per row and group of 32 (f32 scale): |dx_i| <= amax_g / 254
//   A, B -> int8 per row and group of 32 (fp16 scale): |dW| <= amax_g (1/254 + 1/1024)
//           (half a step, plus the fp16 scale's rounding: 2^-11 relative)
//   u = A x (fp32, exact up to the errors above) -> int8 per row: |du| <= amax(u) / 254
// and the bound on B u follows by the triangle inequality. Rows without an
// adapter must equal the plain matmul exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "naive_forward.h"
#include "tern/core/task_pool.h"
#include "tern/kernels/ops.h"
#include "tern/model/gen_arch.h"
#include "tern/model/lora.h"
#include "testutil.h"
#include "tiny_model.h"

namespace tern {
namespace {

// Per element of v (rows of n): amax of its group of 32 times f.
std::vector<double> group_err(const std::vector<float>& v, int n, double f) {
  std::vector<double> e(v.size());
  for (size_t g = 0; g < v.size(); g += 32) {
    double amax = 0;
    for (size_t j = g; j < std::min(v.size(), g + 32); ++j)
      amax = std::max(amax, double(std::fabs(v[j])));
    for (size_t j = g; j < std::min(v.size(), g + 32); ++j) e[j] = amax * f;
  }
  (void)n;
  return e;
}

TEST(LoraStep, FastPathIsWithinTheDerivedBoundOfTheExactTerm) {
  TaskPool pool(2);
  test::TinyModelSpec spec;
  spec.d_model = 96;  // three groups of 32 along the input
  const std::string base_path = test::write_tiny_model(spec, "lora_step_base.gguf");
  const gguf::GgufFile base = gguf::GgufFile::open(base_path);
  const ModelConfig cfg = ModelConfig::from_gguf(base);
  for (int rank : {8, 16, 40}) {  // under, at and over one group of B's reduction
    GenLoraOptions o;
    o.rank = rank;
    o.seed = uint64_t(rank);
    const std::string path = test::temp_path("lora_step_" + std::to_string(rank) + ".gguf");
    generate_lora(base, o).writer.write(path);
    const auto ad = LoraAdapter::load(path, cfg);
    const gguf::GgufFile adf = gguf::GgufFile::open(path);
    for (LoraSlot slot : {LoraSlot::Q, LoraSlot::Down}) {
      const LoraMatrix& m = *ad->get(1, slot);
      const std::string name = std::string("blk.1.") + lora_slot_tensor(slot) + ".weight";
      const auto a = reference::tensor_f32(adf, name + ".lora_a");  // (rank, n_in)
      const auto b = reference::tensor_f32(adf, name + ".lora_b");  // (n_out, rank)
      const auto wf = reference::tensor_f32(base, name);
      const kernels::PackedMatrix w = kernels::pack_matrix(DType::F32, wf.data(), m.n_out, m.n_in,
                                                           kernels::WeightFormat::Int8Sym);
      const int T = 7;
      std::mt19937 rng(uint32_t(rank) * 7 + uint32_t(slot));
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<float> x(size_t(T) * m.n_in);
      for (float& v : x) v = nd(rng);
      kernels::QuantizedActs qa;
      kernels::quantize_activations(x.data(), T, m.n_in, qa, pool);
      std::vector<float> plain(size_t(T) * m.n_out), y(plain.size());
      kernels::matmul(w, qa, plain.data(), pool);
      // Rows 0-1 at scale 1, row 2 none, rows 3-5 at 0.5, row 6 at 1 again.
      const std::vector<LoraRows> rows = {
          {ad.get(), 1.0f, 0, 2}, {ad.get(), 0.5f, 3, 3}, {ad.get(), 1.0f, 6, 1}};
      LoraStep step;
      const LoraLinear out{slot, &w, y.data()};
      step.linear(1, {&out, 1}, rows, qa, pool);
      const auto ea = group_err(a, m.n_in, 1.0 / 254 + 1.0 / 1024);
      const auto eb = group_err(b, m.rank, 1.0 / 254 + 1.0 / 1024);
      for (int t = 0; t < T; ++t) {
        const float user = t == 2 ? 0.0f : (t >= 3 && t <= 5 ? 0.5f : 1.0f);
        const float* yr = y.data() + size_t(t) * m.n_out;
        const float* pr = plain.data() + size_t(t) * m.n_out;
        if (user == 0.0f) {
          for (int i = 0; i < m.n_out; ++i) ASSERT_EQ(yr[i], pr[i]) << "row without adapter";
          continue;
        }
        const std::vector<float> xr(x.begin() + t * m.n_in, x.begin() + (t + 1) * m.n_in);
        const auto ex = group_err(xr, m.n_in, 1.0 / 254 * (1 + 1e-5));
        std::vector<double> u(size_t(m.rank)), du(size_t(m.rank));
        double umax = 0;
        for (int r = 0; r < m.rank; ++r) {
          for (int i = 0; i < m.n_in; ++i) {
            const size_t k = size_t(r) * m.n_in + i;
            u[size_t(r)] += double(a[k]) * xr[size_t(i)];
            du[size_t(r)] += ea[k] * std::fabs(xr[size_t(i)]) + std::fabs(a[k]) * ex[size_t(i)] +
                             ea[k] * ex[size_t(i)];
          }
          umax = std::max(umax, std::fabs(u[size_t(r)]) + du[size_t(r)]);
        }
        // u is quantized per group of 32 of its (zero-padded) row: bound with the row's amax.
        const double eu = umax / 254 * (1 + 1e-5);
        const double s = ad->scale(m, user);
        double worst = 0;
        for (int o = 0; o < m.n_out; ++o) {
          double want = 0, bound = 0, mag = 0;
          for (int r = 0; r < m.rank; ++r) {
            const size_t k = size_t(o) * m.rank + r;
            const double ur = u[size_t(r)], err_u = du[size_t(r)] + eu;
            want += double(b[k]) * ur;
            bound += eb[k] * (std::fabs(ur) + err_u) + std::fabs(b[k]) * err_u;
            mag += std::fabs(b[k] * ur);
          }
          want *= s;
          bound = std::fabs(s) * (bound + 1e-5 * mag) + 1e-5 * std::fabs(pr[o]);  // + fp32 sums
          const double got = double(yr[o]) - pr[o];
          ASSERT_LE(std::fabs(got - want), bound)
              << "rank " << rank << " slot " << int(slot) << " row " << t << " out " << o;
          worst = std::max(worst, std::fabs(got - want) / std::max(1e-12, bound));
          EXPECT_GT(std::fabs(want), 0.0);
        }
        if (t == 0) {
          std::printf("rank %d %s: worst error / bound %.3f\n", rank, lora_slot_tensor(slot),
                      worst);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern
