// Kernel dispatch (chosen once from CPUID; TERN_KERNELS=scalar forces the
// reference path) and the work splitting shared by every ISA.
#include "dispatch.h"

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "tern/core/cpu.h"
#include "tern/core/log.h"
#include "tern/core/task_pool.h"

namespace tern::kernels {

const KernelTable& active_kernels() {
  static const KernelTable& table = []() -> const KernelTable& {
    const char* force = std::getenv("TERN_KERNELS");
    const std::string_view want = force ? force : "";
    const auto& cpu = cpu_features();
    const KernelTable* avx2 = avx2_kernels();
    const KernelTable* pick = &scalar_kernels();
    if (want != "scalar" && avx2 && cpu.avx2 && cpu.fma && cpu.f16c) pick = avx2;
    log::get("kernels")->debug("using {} kernels", pick->isa);
    return *pick;
  }();
  return table;
}

const char* kernel_isa() { return active_kernels().isa; }

void quantize_activations(const float* x, int rows, int n, QuantizedActs& qa) {
  qa.resize(rows, n);
  active_kernels().quantize_rows(x, 0, rows, n, qa);
}

void matmul(const PackedMatrix& w, const QuantizedActs& x, float* y, TaskPool& pool) {
  const KernelTable& k = active_kernels();
  const int tiles = w.n_tiles();
  const int rows = x.rows;
  // Each task covers a chunk of output tiles for a chunk of rows. Rows are
  // chunked so that one weight tile is read once for many rows (batched
  // decode / prefill), tiles so that every worker gets several tasks and the
  // shared counter in the pool balances the tail.
  const int row_chunk = rows <= 16 ? rows : 16;
  const int row_tasks = (rows + row_chunk - 1) / row_chunk;
  const int want_tasks = pool.size() * 8;
  int tile_chunk = std::max(1, tiles * row_tasks / std::max(1, want_tasks));
  tile_chunk = std::min(tile_chunk, tiles);
  const int tile_tasks = (tiles + tile_chunk - 1) / tile_chunk;
  pool.run(int64_t(tile_tasks) * row_tasks, [&](int64_t task, int) {
    const int tt = int(task % tile_tasks), rt = int(task / tile_tasks);
    const int t0 = tt * tile_chunk, t1 = std::min(tiles, t0 + tile_chunk);
    const int r0 = rt * row_chunk, r1 = std::min(rows, r0 + row_chunk);
    k.gemm_tiles(w, x, y, r0, r1, t0, t1);
  });
}

void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) {
  active_kernels().rmsnorm(x, weight, out, n, eps);
}
void swiglu(const float* gate, const float* up, float* out, int n) {
  active_kernels().swiglu(gate, up, out, n);
}
void softmax(float* x, int n) { active_kernels().softmax(x, n); }
void attention_f16(const float* q, const uint16_t* k, const uint16_t* v, int n_kv, int head_dim,
                   int64_t stride, float* out) {
  active_kernels().attention_f16(q, k, v, n_kv, head_dim, stride, out);
}

// RoPE is cheap (a few hundred multiplies per token) and its angle schedule
// must match llama.cpp's exactly, so it has a single portable implementation.
void rope(float* x, int n_heads, int pos, const RopeParams& p) {
  const float theta_scale = std::pow(p.theta_base, -2.0f / float(p.rope_dims));
  const int half = p.rope_dims / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + h * p.head_dim;
    float theta = float(pos);
    for (int i = 0; i < half; ++i) {
      const float th = p.freq_factors ? theta / p.freq_factors[i] : theta;
      const float c = std::cos(th), s = std::sin(th);
      const int a = p.neox ? i : 2 * i;
      const int b = p.neox ? i + half : 2 * i + 1;
      const float x0 = xh[a], x1 = xh[b];
      xh[a] = x0 * c - x1 * s;
      xh[b] = x0 * s + x1 * c;
      theta *= theta_scale;
    }
  }
}

}  // namespace tern::kernels

#ifndef TERN_HAVE_AVX2
namespace tern::kernels {
const KernelTable* avx2_kernels() { return nullptr; }
}  // namespace tern::kernels
#endif
