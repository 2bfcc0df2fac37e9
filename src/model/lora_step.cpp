// A step's linear layers with the adapters' low-rank terms (LoraStep).
//
// Cost model (SmolLM2-135M, rank 16 on all 7 weights): an adapter is ~4.9M
// weights, ~4% of the base's multiply-adds per row. The base step is
// compute-bound in the int8 kernels, so the adapters run on the same kernels
// (int8 A and B, per-32 fp16 scales) and each adapter's matrices are read
// once per step for all of its rows: 5.19 MB per adapter and step (a
// rank-16 B two rows to a group, LoraMatrix::b_pairs; 7.83 MB padded to 32
// columns) instead of ~20 MB of fp32. With one row per adapter those bytes,
// not the arithmetic, are the cost (16 adapters: 83 MB a step, more than the
// base's 66 MB of int4 weights). The joins are the other cost:
// every A x rides in the base weights' own dispatch, and one more dispatch
// runs every B u of the layer's weights that share the input.
//
// Precision: on top of the int8 activations the base weight already uses,
// A and B are rounded to int8 (per row and group of 32, error at most half a
// step, amax/254, plus the fp16 scale's rounding) and u = A x is rounded to
// int8 per row. The low-rank term is small next to the base output, so its
// relative error of ~1% is a small fraction of the base's own quantization
// error (tests/unit/model/lora_step_test.cpp checks the derived bound).
#include <algorithm>

#include "tern/kernels/gemm_jobs.h"
#include "tern/kernels/ops.h"
#include "tern/model/lora.h"

namespace tern {

void LoraStep::linear(int layer, std::span<const LoraLinear> outs, std::span<const LoraRows> rows,
                      const kernels::QuantizedActs& x, TaskPool& pool) {
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
        // A x of gathered row r lands at u_[u_off + r * rank] (r in [g0, g1)).
        parts_.push_back({o, m, ad, g0, g1, u_size, z_size});
        u_size += size_t(g1) * size_t(m->rank);
        z_size += size_t(g1 - g0) * 2 * size_t(m->b.n_out);  // 2 rows each if b_pairs
      }
      g0 = g1;
    }
  }
  if (u_.size() < u_size) u_.resize(u_size);
  if (z_.size() < z_size) z_.resize(z_size);
  if (scale_.size() < 2 * size_t(n_rows) * parts_.size()) {
    scale_.resize(2 * size_t(n_rows) * parts_.size());
    pair_row_.resize(2 * size_t(n_rows) * parts_.size());
  }
  if (uq_.size() < parts_.size()) uq_.resize(parts_.size());

  // Dispatch 1: the base products over every row, and every adapter's A x.
  jobs_.clear();
  for (const LoraLinear& o : outs) jobs_.push_back({o.w, &x, 0, x.rows, o.y});
  for (const Part& p : parts_)
    jobs_.push_back({&p.m->a, &gathered_, p.g0, p.g1, u_.data() + p.u_off});
  kernels::gemm_jobs(jobs_, pool);

  // u to int8 (rows of rank zero-padded to B's group, or the [u, 0] / [0, u]
  // pair of rows for a paired B), then dispatch 2: every
  // B u, scaled and added into its rows of the output.
  jobs_.clear();
  for (size_t k = 0; k < parts_.size(); ++k) {
    const Part& p = parts_[k];
    const int n = p.g1 - p.g0, rank = p.m->rank, kp = p.m->b.n_in, f = p.m->b_pairs ? 2 : 1;
    // f rows of u a row: [u, 0] and [0, u] when B is packed two rows to a group.
    upad_.assign(size_t(n) * f * size_t(kp), 0.0f);
    for (int r = 0; r < n * f; ++r) {
      std::copy_n(u_.data() + p.u_off + size_t(p.g0 + r / f) * rank, rank,
                  upad_.data() + size_t(r) * kp + (r % f) * (kp / 2));
    }
    kernels::quantize_activations(upad_.data(), n * f, kp, uq_[k], pool);
    float* sc = scale_.data() + k * 2 * size_t(n_rows);
    int* rows_to = pair_row_.data() + k * 2 * size_t(n_rows);
    for (int r = 0; r < n * f; ++r) {
      sc[r] = p.ad->scale(*p.m, user_scale_[size_t(p.g0 + r / f)]);
      rows_to[r] = row_of_[size_t(p.g0 + r / f)];
    }
    jobs_.push_back({&p.m->b, &uq_[k], 0, n * f, z_.data() + p.z_off, outs[size_t(p.out)].y,
                     rows_to, sc, f, p.m->n_out});
  }
  kernels::gemm_jobs(jobs_, pool);
}

}  // namespace tern
