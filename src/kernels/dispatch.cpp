// Kernel dispatch (chosen once from the CPU features; TERN_KERNELS forces a table) and
// the work splitting shared by every ISA.
#include "dispatch.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tern/core/cpu.h"
#include "tern/core/log.h"
#include "tern/core/task_pool.h"

namespace tern::kernels {

namespace {

bool cpu_runs(Isa isa) {
  const CpuFeatures& cpu = cpu_features();
  const bool avx2 = cpu.avx2 && cpu.fma && cpu.f16c;
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
      return avx2;
    case Isa::AvxVnni:
      return avx2 && cpu.avxvnni;
    // Every CPU with AVX512-VNNI and BW also has VL (Cascade Lake, Ice Lake, Zen 4 on).
    case Isa::Avx512Vnni:
      return avx2 && cpu.avx512f && cpu.avx512bw && cpu.avx512vnni;
    case Isa::Neon:
      return cpu.neon;
    case Isa::NeonDotprod:
      return cpu.neon && cpu.dotprod;
    case Isa::NeonI8mm:
      return cpu.neon && cpu.dotprod && cpu.i8mm;
  }
  return false;
}

const KernelTable* built_table(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return &scalar_kernels();
    case Isa::Avx2:
      return avx2_kernels();
    case Isa::AvxVnni:
      return avxvnni_kernels();
    case Isa::Avx512Vnni:
      return avx512_kernels();
    case Isa::Neon:
      return neon_kernels();
    case Isa::NeonDotprod:
      return dotprod_kernels();
    case Isa::NeonI8mm:
      return i8mm_kernels();
  }
  return nullptr;
}

struct Choice {
  Isa isa = Isa::Scalar;
  std::string why;
};

const Choice& choice() {
  static const Choice c = [] {
    Choice ch;
    const auto& cpu = cpu_features();
    g_gemv_prefetch = cpu.amd ? 0 : 8;
    if (const char* pf = std::getenv("TERN_GEMV_PREFETCH")) g_gemv_prefetch = std::atoi(pf);
    const std::vector<Isa> avail = available_isas();
    std::string names;
    for (Isa i : avail) names += std::string(names.empty() ? "" : ", ") + isa_name(i);
    const char* force = std::getenv("TERN_KERNELS");
    const std::string_view want = force ? force : "";
    if (want.empty()) {
      ch.isa = avail.back();
      ch.why = std::string(isa_name(ch.isa)) + " (best of: " + names + ")";
    } else {
      bool found = false;
      for (Isa i : avail) {
        if (want == isa_name(i)) ch.isa = i, found = true;
      }
      if (found) {
        ch.why = std::string(isa_name(ch.isa)) + " (TERN_KERNELS; this CPU runs: " + names + ")";
      } else {
        ch.isa = Isa::Scalar;
        ch.why = "scalar (TERN_KERNELS=" + std::string(want) +
                 " cannot run here; this CPU runs: " + names + ")";
        log::get("kernels")->warn(
            "TERN_KERNELS={}: not available here (this CPU and build run: {}), "
            "using scalar kernels",
            want, names);
      }
    }
    std::string feats;
    auto add = [&](bool on, const char* name) {
      if (on) feats += std::string(feats.empty() ? "" : " ") + name;
    };
    add(cpu.avx2, "avx2"), add(cpu.fma, "fma"), add(cpu.f16c, "f16c"), add(cpu.avxvnni, "avxvnni");
    add(cpu.avx512f, "avx512f"), add(cpu.avx512bw, "avx512bw"), add(cpu.avx512vnni, "avx512vnni");
    add(cpu.avx512bf16, "avx512bf16"), add(cpu.neon, "asimd"), add(cpu.dotprod, "dotprod");
    add(cpu.i8mm, "i8mm"), add(cpu.fp16, "fp16"), add(cpu.bf16, "bf16"), add(cpu.sve, "sve");
    add(cpu.sve2, "sve2");
    ch.why += "; CPU: " + (feats.empty() ? std::string("no SIMD features found") : feats);
    log::get("kernels")->debug("kernels: {}", ch.why);
    return ch;
  }();
  return c;
}

}  // namespace

int g_gemv_prefetch = 8;

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::AvxVnni:
      return "avxvnni";
    case Isa::Avx512Vnni:
      return "avx512vnni";
    case Isa::Neon:
      return "neon";
    case Isa::NeonDotprod:
      return "neon-dotprod";
    case Isa::NeonI8mm:
      return "neon-i8mm";
  }
  return "?";
}

const KernelTable* kernel_table(Isa isa) {
  return cpu_runs(isa) ? built_table(isa) : nullptr;
}

bool isa_available(Isa isa) {
  return kernel_table(isa) != nullptr;
}

std::vector<Isa> available_isas() {
  std::vector<Isa> v;
  for (int i = 0; i < kNumIsas; ++i) {
    if (kernel_table(Isa(i))) v.push_back(Isa(i));
  }
  return v;
}

Isa active_isa() {
  return choice().isa;
}

std::string isa_choice() {
  return choice().why;
}

const KernelTable& active_kernels() {
  static const KernelTable& table = *kernel_table(active_isa());
  return table;
}

const char* kernel_isa() {
  return isa_name(active_isa());
}

void quantize_activations(const float* x, int rows, int n, QuantizedActs& qa, TaskPool& pool) {
  qa.resize(rows, n);
  qa.x = x;  // for float weights, which take the fp32 rows
  const KernelTable& k = active_kernels();
  // About 8K values a task (a few microseconds): decode stays on the calling thread.
  const int grain = std::max(1, 8192 / std::max(1, n));
  if (rows <= grain) {
    k.quantize_rows(x, 0, rows, n, qa);
    return;
  }
  pool.parallel_for(rows, grain, [&](int64_t r0, int64_t r1, int) {
    k.quantize_rows(x, int(r0), int(r1), n, qa);
  });
}

// Rows of activations a matmul task handles together. Each tile is applied to
// all of them while it sits in L1, so more rows means fewer weight reads; but
// the task's int8 activations (rows x n_in bytes) are re-read for every tile
// and should stay in L1 (48 KB on current cores) too. Batches up to 16 rows
// (batched decode) are never split: every weight is read once per step.
int row_chunk_for(int rows, int n_in) {
  if (rows <= 16) return rows;
  const int fit = std::clamp(32768 / n_in / 4 * 4, 4, 64);
  if (rows <= fit) return rows;
  const int chunks = (rows + fit - 1) / fit;          // as few chunks as fit in L1,
  return ((rows + chunks - 1) / chunks + 3) / 4 * 4;  // evened out, in whole micro-kernels
}

void matmul(std::initializer_list<MatmulOut> outs, const QuantizedActs& x, TaskPool& pool) {
  constexpr int kMaxOuts = 4;
  assert(outs.size() >= 1 && outs.size() <= kMaxOuts);
  const KernelTable& k = active_kernels();
  const MatmulOut* out = outs.begin();
  const int n_outs = int(outs.size());
  const int rows = x.rows;
  int total_tiles = 0;
  for (const MatmulOut& o : outs) {
    assert(o.w->n_in == x.n_in);
    total_tiles += o.w->n_tiles();
  }
  // Tasks: (row chunk) x (chunk of tiles of one output). About 8 tasks a
  // worker, so the shared counter in the pool balances the tail.
  const int row_chunk = row_chunk_for(rows, x.n_in);
  const int row_tasks = (rows + row_chunk - 1) / row_chunk;
  const int want_tasks = pool.size() == 1 ? 1 : pool.size() * 8;
  const int tile_chunk = std::max(1, total_tiles * row_tasks / want_tasks);
  int first[kMaxOuts + 1] = {0};  // first tile task of each output
  for (int i = 0; i < n_outs; ++i) {
    first[i + 1] = first[i] + (out[i].w->n_tiles() + tile_chunk - 1) / tile_chunk;
  }
  const int tile_tasks = first[n_outs];
  pool.run(int64_t(tile_tasks) * row_tasks, [&](int64_t task, int) {
    const int tt = int(task % tile_tasks), rt = int(task / tile_tasks);
    int i = 0;
    while (tt >= first[i + 1]) ++i;
    const PackedMatrix& w = *out[i].w;
    const int t0 = (tt - first[i]) * tile_chunk, t1 = std::min(w.n_tiles(), t0 + tile_chunk);
    const int r0 = rt * row_chunk, r1 = std::min(rows, r0 + row_chunk);
    k.gemm_tiles(w, x, out[i].y, r0, r1, t0, t1);
  });
}

void matmul(const PackedMatrix& w, const QuantizedActs& x, float* y, TaskPool& pool) {
  matmul({MatmulOut{&w, y}}, x, pool);
}

void rmsnorm(const float* x, const float* weight, float* out, int n, float eps) {
  active_kernels().rmsnorm(x, weight, out, n, eps);
}
void swiglu(const float* gate, const float* up, float* out, int n) {
  active_kernels().swiglu(gate, up, out, n);
}
void geglu(const float* gate, const float* up, float* out, int n) {
  active_kernels().geglu(gate, up, out, n);
}
void layernorm(const float* x, const float* weight, const float* bias, float* out, int n,
               float eps) {
  double sum = 0.0, sq = 0.0;
  for (int i = 0; i < n; ++i) sum += double(x[i]);
  const double mean = sum / n;
  for (int i = 0; i < n; ++i) sq += (double(x[i]) - mean) * (double(x[i]) - mean);
  const float scale = float(1.0 / std::sqrt(sq / n + double(eps)));
  const float m = float(mean);
  for (int i = 0; i < n; ++i) out[i] = (x[i] - m) * scale * weight[i] + bias[i];
}
void gelu(float* x, int n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * v * (1.0f + 0.044715f * v * v)));
  }
}
void attention_f16(const float* q, float* out, int64_t q_stride, int n_tok, int n_grp, int n_kv0,
                   const uint16_t* k, const uint16_t* v, int64_t kv_stride, int head_dim) {
  active_kernels().attention_f16(q, out, q_stride, n_tok, n_grp, n_kv0, k, v, kv_stride, head_dim);
}

// RoPE is cheap once the angles are known, and its angle schedule must match
// llama.cpp's exactly (theta *= theta_scale, libm cos/sin), so it has a single
// portable implementation; the cos/sin of a position are computed once for
// all heads of q and k.
void rope(float* q, int n_q, float* k, int n_k, int pos, const RopeParams& p) {
  constexpr int kMaxPairs = 256;
  const int half = p.rope_dims / 2;
  assert(half <= kMaxPairs);
  float cs[kMaxPairs], sn[kMaxPairs];
  const float theta_scale = std::pow(p.theta_base, -2.0f / float(p.rope_dims));
  float theta = float(pos);
  for (int i = 0; i < half; ++i) {
    const float th = p.freq_factors ? theta / p.freq_factors[i] : theta;
    cs[i] = std::cos(th);
    sn[i] = std::sin(th);
    theta *= theta_scale;
  }
  auto rotate = [&](float* x, int n_heads) {
    for (int h = 0; h < n_heads; ++h) {
      float* xh = x + h * p.head_dim;
      for (int i = 0; i < half; ++i) {
        const int a = p.neox ? i : 2 * i;
        const int b = p.neox ? i + half : 2 * i + 1;
        const float x0 = xh[a], x1 = xh[b];
        xh[a] = x0 * cs[i] - x1 * sn[i];
        xh[b] = x0 * sn[i] + x1 * cs[i];
      }
    }
  };
  rotate(q, n_q);
  if (k) rotate(k, n_k);
}

}  // namespace tern::kernels

// The tables this build lacks (their files are compiled only for their
// architecture and compiler): nullptr, so kernel_table() never offers them.
#define TERN_NO_TABLE(fn)   \
  const KernelTable* fn() { \
    return nullptr;         \
  }
namespace tern::kernels {
#ifndef TERN_HAVE_AVX2
TERN_NO_TABLE(avx2_kernels)
#endif
#ifndef TERN_HAVE_AVXVNNI
TERN_NO_TABLE(avxvnni_kernels)
#endif
#ifndef TERN_HAVE_AVX512
TERN_NO_TABLE(avx512_kernels)
#endif
#ifndef TERN_HAVE_NEON
TERN_NO_TABLE(neon_kernels)
#endif
#ifndef TERN_HAVE_DOTPROD
TERN_NO_TABLE(dotprod_kernels)
#endif
#ifndef TERN_HAVE_I8MM
TERN_NO_TABLE(i8mm_kernels)
#endif
}  // namespace tern::kernels
