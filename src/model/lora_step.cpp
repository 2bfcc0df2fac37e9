// A step's linear layers with the adapters' low-rank terms (LoraStep).
//
// Cost model (SmolLM2-135M, rank 16 on all 7 weights): an adapter is ~4.9M
// weights, ~4.6% of the base's multiply-adds per row. With 16 rows the base
// step is compute-bound in the int8 kernels; an adapter used by one row is
// a pair of GEMVs and memory-bound: ~5.3 MB of int8 A and B (plus scales)
// per adapter and step, so 16 adapters stream ~85 MB, more than the base's
// int4 weights. So: B's rank is not padded to a group (LowRankB), u = A x
// stays fp32 (no requantization pass), and every adapter's A x and B u ride
// in the base weights' own dispatch, interleaved with the base tasks so that
// one core's adapter streaming overlaps the other's base compute: no join
// beyond the base's own. The scaled B u is added into y after the join on
// the calling thread (rows x n_out adds, a few microseconds).
//
// Precision: on top of the int8 activations the base weight already uses,
// A is rounded to int8 (per row and group of 32, error at most half a step,
// amax/254, plus the fp16 scale's rounding) and B to int8 (per row and group
// of 32 of the rank, fp32 scale: amax/254). The low-rank term is small next
// to the base output, so its relative error of under 1% is a small fraction
// of the base's own quantization error (tests/unit/model/lora_step_test.cpp
// checks the derived bound).
#include <algorithm>

#include "tern/kernels/gemm_jobs.h"
#include "tern/kernels/ops.h"
#include "tern/model/lora.h"

namespace tern {

void LoraStep::gather(std::span<const LoraRows> rows, const kernels::QuantizedActs& x) {
  // The entries in adapter order (then batch order), and their rows gathered
  // in that order: each adapter's rows are one contiguous range.
  by_ad_.clear();
  for (const LoraRows& r : rows) {
    if (r.adapter && r.n > 0) by_ad_.push_back(&r);
  }
  std::sort(by_ad_.begin(), by_ad_.end(), [](const LoraRows* p, const LoraRows* q) {
    return p->adapter != q->adapter ? std::less<>()(p->adapter, q->adapter) : p->t0 < q->t0;
  });
  int n_rows = 0;
  for (const LoraRows* r : by_ad_) n_rows += r->n;
  const int groups = x.n_in / kernels::kGroup;
  gathered_.resize(n_rows, x.n_in);
  gathered_.rows = n_rows;
  row_of_.resize(size_t(n_rows));
  user_scale_.resize(size_t(n_rows));
  int g = 0;
  for (const LoraRows* r : by_ad_) {
    const size_t src = size_t(r->t0), dst = size_t(g), n = size_t(r->n);
    std::copy_n(x.q.data() + src * x.n_in, n * x.n_in, gathered_.q.data() + dst * x.n_in);
    std::copy_n(x.d.data() + src * groups, n * groups, gathered_.d.data() + dst * groups);
    std::copy_n(x.s.data() + src * groups, n * groups, gathered_.s.data() + dst * groups);
    std::copy_n(x.isum.data() + src * groups, n * groups, gathered_.isum.data() + dst * groups);
    for (int k = 0; k < r->n; ++k, ++g) {
      row_of_[size_t(g)] = r->t0 + k;
      user_scale_[size_t(g)] = r->scale;
    }
  }
}

void LoraStep::linear(int layer, std::span<const LoraLinear> outs, std::span<const LoraRows> rows,
                      const kernels::QuantizedActs& x, TaskPool& pool) {
  gather(rows, x);
  // One part per (output, adapter touching it); scratch offsets first.
  parts_.clear();
  size_t u_size = 0, z_size = 0;
  for (int o = 0; o < int(outs.size()); ++o) {
    int g0 = 0;
    for (size_t i = 0; i < by_ad_.size();) {
      const LoraAdapter* ad = by_ad_[i]->adapter;
      int g1 = g0;
      for (; i < by_ad_.size() && by_ad_[i]->adapter == ad; ++i) g1 += by_ad_[i]->n;
      if (const LoraMatrix* m = ad->get(layer, outs[size_t(o)].slot)) {
        parts_.push_back({o, m, ad, g0, g1, u_size, z_size});
        u_size += size_t(g1) * size_t(m->rank);
        z_size += size_t(g1 - g0) * size_t(m->n_out);
      }
      g0 = g1;
    }
  }
  if (u_.size() < u_size) u_.resize(u_size);
  if (z_.size() < z_size) z_.resize(z_size);

  // One dispatch: the base products over every row, and every part's B (A x).
  jobs_.clear();
  for (const LoraLinear& o : outs) jobs_.push_back({o.w, &x, 0, x.rows, o.y});
  low_rank_.clear();
  for (const Part& p : parts_) {
    low_rank_.push_back(
        {&p.m->a, &p.m->b, &gathered_, p.g0, p.g1, u_.data() + p.u_off, z_.data() + p.z_off});
  }
  kernels::gemm_jobs(jobs_, low_rank_, pool);

  // y[row] += s B u, each part's rows at their own scale.
  for (const Part& p : parts_) {
    const int n = p.m->n_out;
    float* y = outs[size_t(p.out)].y;
    for (int r = p.g0; r < p.g1; ++r) {
      const float s = p.ad->scale(*p.m, user_scale_[size_t(r)]);
      const float* z = z_.data() + p.z_off + size_t(r - p.g0) * n;
      float* yr = y + size_t(row_of_[size_t(r)]) * n;
      for (int o = 0; o < n; ++o) yr[o] += s * z[o];
    }
  }
}

}  // namespace tern
