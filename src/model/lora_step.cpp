// A step's linear layers with the adapters' low-rank terms (LoraStep).
//
// Cost model (SmolLM2-135M, rank 16 on all 7 weights): an adapter is ~4.9M
// weights, ~4.6% of the base's multiply-adds per row. With 16 rows the base
// step is compute-bound in the int8 kernels; an adapter used by one row is
// a pair of GEMVs and memory-bound: 5.66 MB of int8 A and B (with their
// scales) per adapter and step (7.83 MB with B's rank padded to 32), so 16
// adapters stream 90 MB, more than the base's int4 weights (66 MB). So: B's rank is not padded to a group (LowRankB), u = A x
// stays fp32 (no requantization pass), and every adapter's A x and B u ride
// in the base weights' own dispatch: every A x first (small tasks), then
// each base task adds the adapters' B u for its own output tiles, so B's
// streaming is spread over the base's compute-bound tasks and there is no
// join beyond the base's own, and no pass over y after it.
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
  const int n_rows = gathered_.rows;
  // One part per (output, adapter touching it): its rows, u scratch and
  // per-row scales (s depends on the matrix's rank).
  parts_.clear();
  size_t u_size = 0;
  int g0 = 0;
  for (size_t i = 0; i < by_ad_.size();) {  // adapter by adapter: its parts share u tasks
    const LoraAdapter* ad = by_ad_[i]->adapter;
    int g1 = g0;
    for (; i < by_ad_.size() && by_ad_[i]->adapter == ad; ++i) g1 += by_ad_[i]->n;
    for (int o = 0; o < int(outs.size()); ++o) {
      if (const LoraMatrix* m = ad->get(layer, outs[size_t(o)].slot)) {
        // A x of gathered row r lands at u_[u_off + r * rank] (r in [g0, g1)).
        parts_.push_back({o, m, ad, g0, g1, u_size});
        u_size += size_t(g1) * size_t(m->rank);
      }
    }
    g0 = g1;
  }
  if (u_.size() < u_size) u_.resize(u_size);
  size_t uq_size = 0;
  for (const Part& p : parts_) uq_size += size_t(p.g1) * size_t(2 * p.m->b.rank_pairs());
  if (uq_.size() < uq_size) uq_.resize(uq_size);
  if (scale_.size() < parts_.size() * size_t(n_rows)) scale_.resize(parts_.size() * size_t(n_rows));
  if (ud_.size() < parts_.size() * size_t(n_rows)) ud_.resize(parts_.size() * size_t(n_rows));

  // One dispatch: the base products over every row, each adding its parts'
  // scaled B (A x) into its own tiles.
  jobs_.clear();
  for (const LoraLinear& o : outs) jobs_.push_back({o.w, &x, 0, x.rows, o.y});
  low_rank_.clear();
  size_t uq_off = 0;
  for (size_t k = 0; k < parts_.size(); ++k) {
    const Part& p = parts_[k];
    float* sc = scale_.data() + k * size_t(n_rows);
    for (int r = p.g0; r < p.g1; ++r) sc[r] = p.ad->scale(*p.m, user_scale_[size_t(r)]);
    const int stride = 2 * p.m->b.rank_pairs();
    const kernels::LowRankU uq{uq_.data() + uq_off, ud_.data() + k * size_t(n_rows), stride};
    uq_off += size_t(p.g1) * size_t(stride);
    low_rank_.push_back(
        {p.out, &p.m->a, &p.m->b, p.g0, p.g1, u_.data() + p.u_off, uq, row_of_.data(), sc});
  }
  kernels::gemm_jobs(jobs_, &gathered_, low_rank_, pool);
}

}  // namespace tern
