#include "tern/model/attention_plan.h"

#include <algorithm>
#include <cstdint>

#include "tern/core/task_pool.h"
#include "tern/kv/kv_attend.h"
#include "tern/kv/paged_kv.h"

namespace tern {

void AttentionPlan::plan(const Batch& batch, const std::vector<int>& tok_pos, const Shape& shape,
                         const kv::PagedKv& kv) {
  s_ = shape;
  const int group = s_.group;
  const int tok_block = std::max(1, 32 / group);
  // Local layers' tokens each start at their own position: never split.
  const bool split_ok = kv.can_split() && group <= kv::kMaxTileRows && s_.window <= 0;
  const int seg_tok = kv.attend_segment_tokens();
  // One (KV head, segment) of a token: m, l and acc for its group's rows.
  const size_t part_stride = size_t(group) * size_t(s_.head_dim + 2);
  blocks_.clear();
  splits_.clear();
  size_t part = 0;
  int t = 0;
  for (size_t ei = 0; ei < batch.entries.size(); ++ei) {
    const int n = int(batch.entries[ei].tokens.size());
    const int ctx = tok_pos[size_t(t)] + n;
    const auto& runs = batch.entries[ei].embeddings;
    const bool bidir = std::any_of(runs.begin(), runs.end(),
                                   [](const EmbeddingRun& r) { return r.bidirectional; });
    if (!s_.causal) {  // the whole entry both ways: every token up to its last position
      for (int j = 0; j < n; j += tok_block)
        blocks_.push_back(
            {int(ei), t + j, std::min(tok_block, n - j), tok_pos[size_t(t + j)], ctx});
    } else if (split_ok && !bidir && n <= tok_block && ctx > seg_tok) {
      const int n_seg = (ctx + seg_tok - 1) / seg_tok;
      splits_.push_back({int(ei), t, n, n_seg, part});
      part += size_t(n_seg) * size_t(s_.n_kv_heads) * size_t(n) * part_stride;
    } else {
      // Causal stretches in blocks; a bidirectional run's tokens one by one,
      // each attending up to the run's end.
      auto causal = [&](int j0, int j1) {
        for (int j = j0; j < j1; j += tok_block) {
          const int t0 = t + j;
          blocks_.push_back({int(ei), t0, std::min(tok_block, j1 - j), tok_pos[size_t(t0)]});
        }
      };
      int j = 0;
      for (const EmbeddingRun& r : runs) {
        if (!r.bidirectional) continue;
        causal(j, r.offset);
        const int last = tok_pos[size_t(t + r.offset + r.n - 1)];
        for (int k = r.offset; k < r.offset + r.n; ++k)
          blocks_.push_back({int(ei), t + k, 1, last});
        j = r.offset + r.n;
      }
      causal(j, n);
    }
    t += n;
  }
  if (part_.size() < part) part_.resize(part);
}

// A block's cost: its query rows times the positions they attend (the
// first row's, as planned; a local layer's window caps it).
std::pair<size_t, size_t> AttentionPlan::part_blocks(int p, int n) const {
  if (n <= 1) return {0, blocks_.size()};
  auto cost = [&](size_t i) {  // i in run order (latest first)
    const Block& b = blocks_[blocks_.size() - 1 - i];
    int ctx = b.horizon > 0 ? b.horizon : b.pos0 + b.n_tok;
    if (s_.window > 0) ctx = std::min(ctx, s_.window + b.n_tok);
    return double(b.n_tok) * double(ctx);
  };
  double total = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) total += cost(i);
  // Part q starts at the first block whose cost so far reaches q / n of it.
  auto start = [&](int q) {
    if (q <= 0) return size_t(0);
    if (q >= n) return blocks_.size();
    const double at = total * double(q) / double(n);
    double sum = 0;
    size_t i = 0;
    while (i < blocks_.size() && sum + 0.5 * cost(i) < at) sum += cost(i++);
    return i;
  };
  return {start(p), start(p + 1)};
}

void AttentionPlan::run(const Batch& batch, int layer, const std::vector<int>& tok_pos,
                        kv::PagedKv& kv, const float* q, float* attn, TaskPool& pool, int part,
                        int n_parts) {
  const int nkv = s_.n_kv_heads, group = s_.group, hd = s_.head_dim;
  const int qd = nkv * group * hd;
  const size_t part_stride = size_t(group) * size_t(hd + 2);
  const auto [b0, b1] = part_blocks(part, n_parts);
  const int64_t n_block_tasks = int64_t(b1 - b0) * nkv;
  const bool splits_here = part == std::max(n_parts, 1) - 1;
  int64_t n_split_tasks = 0;
  if (splits_here)
    for (const Split& sp : splits_) n_split_tasks += int64_t(sp.n_seg) * nkv;
  if (n_block_tasks + n_split_tasks == 0) return;
  pool.run(n_block_tasks + n_split_tasks, [&](int64_t task, int) {
    if (task < n_block_tasks) {
      const int kvh = int(task % nkv);
      const size_t i = b0 + size_t(task / nkv);
      const Block& bt = blocks_[blocks_.size() - 1 - i];  // latest first
      const size_t at = size_t(bt.t0) * qd + size_t(kvh) * group * hd;
      kv.attend(batch.entries[size_t(bt.entry)].seq, layer, kvh, bt.pos0, bt.n_tok, group, q + at,
                qd, attn + at, qd, s_.window, bt.horizon);
      return;
    }
    int64_t k = task - n_block_tasks;
    size_t si = 0;
    while (k >= int64_t(splits_[si].n_seg) * nkv) {
      k -= int64_t(splits_[si].n_seg) * nkv;
      ++si;
    }
    const Split& sp = splits_[si];
    const int kvh = int(k / sp.n_seg), seg = int(k % sp.n_seg), rows = sp.n_tok * group;
    const size_t stride = size_t(sp.n_tok) * part_stride;
    float* st = part_.data() + sp.off + (size_t(kvh) * sp.n_seg + size_t(seg)) * stride;
    const size_t at = size_t(sp.t0) * qd + size_t(kvh) * group * hd;
    kv.attend_segment(batch.entries[size_t(sp.entry)].seq, layer, kvh, tok_pos[size_t(sp.t0)],
                      sp.n_tok, group, q + at, qd, seg, st, st + rows, st + 2 * rows);
  });
  if (splits_here && !splits_.empty()) merge_splits(attn, pool);
}

// Folds each split token's segment states in segment order, per KV head.
void AttentionPlan::merge_splits(float* attn, TaskPool& pool) {
  const int nkv = s_.n_kv_heads, group = s_.group, hd = s_.head_dim;
  const int qd = nkv * group * hd;
  const size_t part_stride = size_t(group) * size_t(hd + 2);
  merge_.resize(size_t(pool.size()) * size_t(hd));
  pool.run(int64_t(splits_.size()) * nkv, [&](int64_t task, int worker) {
    const Split& sp = splits_[size_t(task / nkv)];
    const int kvh = int(task % nkv), rows = sp.n_tok * group;
    const size_t stride = size_t(sp.n_tok) * part_stride;
    float* acc = merge_.data() + size_t(worker) * size_t(hd);
    for (int r = 0; r < rows; ++r) {
      const int tk = r / group, g = r % group;
      float m = 0, lsum = 0;
      kv::attend_start(hd, &m, &lsum, acc);
      for (int seg = 0; seg < sp.n_seg; ++seg) {
        const float* st = part_.data() + sp.off + (size_t(kvh) * sp.n_seg + size_t(seg)) * stride;
        kv::attend_merge(hd, st[r], st[rows + r], st + 2 * rows + size_t(r) * hd, &m, &lsum, acc);
      }
      kv::attend_finish(hd, lsum, acc,
                        attn + size_t(sp.t0 + tk) * qd + size_t(kvh) * group * hd + size_t(g) * hd);
    }
  });
}

}  // namespace tern
