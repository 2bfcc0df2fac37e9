// PagedKv: the forward-pass hooks. begin_step() plans which blocks of the
// batch live only on flash and starts reading their first layers into the
// staging sets; begin_layer(l) starts layer l + prefetch_layers and waits for
// layer l; attend() reads every block in place (DRAM frame or staging slice);
// end_step() moves streamed blocks back to DRAM when frames are free.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <stdexcept>

#include "paged_kv_impl.h"

namespace tern::kv {

void PagedKvImpl::begin_step(std::span<const SeqId> ids) {
  if (in_step) throw InvalidArgument("KV: begin_step() while a step is open");
  if (ids.size() > seqs.size()) throw InvalidArgument("KV: more sequences in a step than slots");
  for (SeqId id : ids) seq(id);  // validates
  step_seqs.assign(ids.begin(), ids.end());
  reap_loads();
  plan.clear();
  if (flash) {
    for (SeqId id : ids) {
      Seq& s = seqs[size_t(id)];
      if (!s.error.empty()) continue;
      for (int32_t bid : s.table) {
        Block& b = blocks[size_t(bid)];
        if (b.where != Where::Flash || b.stage >= 0) continue;
        if (int64_t(plan.size()) >= stage_cap) {  // cannot happen: streamed <= stage_cap
          s.error = "KV: flash staging overflow";
          break;
        }
        b.stage = int32_t(plan.size());
        plan.push_back(bid);
      }
    }
    // Runs of consecutive slots are read with one operation per layer.
    for (size_t i = 0; i < plan.size(); ++i) plan_slot[i] = blocks[size_t(plan[i])].slot;
    for (size_t i = 0; i < plan.size();) {
      size_t j = i + 1;
      while (j < plan.size() && plan_slot[j] == plan_slot[j - 1] + 1) plan_run[j++] = 0;
      plan_run[i] = int32_t(j - i);
      i = j;
    }
    if (!plan.empty()) {
      for (int l = 0; l < sets; ++l) issue_layer(l);
    }
  }
  in_step = true;
  next_layer = 0;
}

void PagedKvImpl::suspend_step() {
  if (!in_step || !plan.empty() || suspended)
    throw InvalidArgument("KV: suspend_step() outside a step, while streaming, or twice");
  suspended = true;
  suspended_layer = next_layer;
  suspended_seqs.swap(step_seqs);
  step_seqs.clear();
  in_step = false;
}

void PagedKvImpl::resume_step() {
  if (!suspended || in_step) throw InvalidArgument("KV: resume_step() without a suspended step");
  suspended = false;
  step_seqs.swap(suspended_seqs);
  suspended_seqs.clear();
  next_layer = suspended_layer;
  plan.clear();
  in_step = true;
}

void PagedKvImpl::issue_layer(int layer) {
  const int set = layer % sets;
  uint8_t* base = staging.data() + size_t(set) * size_t(stage_cap) * L.slice_bytes;
  int32_t* status = plan_status.data() + size_t(set) * size_t(stage_cap);
  for (size_t i = 0; i < plan.size(); ++i) {
    if (plan_run[i] == 0) continue;
    status[i] = 0;
    flash->read(plan_slot[i], layer, plan_run[i], base + i * L.slice_bytes, layer_io[size_t(set)],
                &status[i]);
    st.bytes_prefetched += int64_t(plan_run[i]) * int64_t(L.slice_bytes);
  }
  flash->submit();
}

void PagedKvImpl::begin_layer(int layer) {
  if (!in_step || layer != next_layer) {
    throw InvalidArgument("KV: begin_layer(" + std::to_string(layer) + ") out of order");
  }
  next_layer = layer + 1;
  if (plan.empty()) return;
  // Layer layer-1 is done, so its staging set is free for layer + prefetch.
  if (layer >= 1 && layer + sets - 1 < L.n_layers) issue_layer(layer + sets - 1);
  const int set = layer % sets;
  wait_timed(layer_io[size_t(set)]);
  const int32_t* status = plan_status.data() + size_t(set) * size_t(stage_cap);
  for (size_t i = 0; i < plan.size(); ++i) {
    if (plan_run[i] == 0 || status[i] == 0) continue;
    st.read_errors += 1;
    const std::string why = "KV flash tier: reading layer " + std::to_string(layer) +
                            " of a block from " + flash->path() +
                            " failed: " + std::strerror(-status[i]);
    for (size_t j = i; j < i + size_t(plan_run[i]); ++j) lose_block(plan[j], why);
  }
}

void PagedKvImpl::end_step() {
  if (!in_step) return;
  if (flash) {
    for (IoGroup& g : layer_io) flash->wait(g);  // an aborted step may leave reads in flight
  }
  // Streamed blocks move back into DRAM when frames are free (after other
  // sequences ended): the loads run between steps and settle at the next
  // begin_step(), which then finds them in DRAM.
  for (int32_t bid : plan) {
    Block& b = blocks[size_t(bid)];
    b.stage = -1;
    if (b.where != Where::Flash) continue;
    // Only room the budget has now: embeddings are not evicted for this.
    if (const int32_t f = take_free_frame(/*reclaim=*/false); f >= 0) start_load(bid, f);
  }
  if (!loading.empty()) flash->submit();
  plan.clear();
  step_seqs.clear();
  in_step = false;
}

void PagedKvImpl::write(SeqId id, int layer, int pos, const float* k, const float* v) {
  const Seq& s = seq(id);
  const int B = L.block_tokens;
  if (pos < s.length || pos >= int(s.table.size()) * B || layer < 0 || layer >= L.n_layers) {
    throw InvalidArgument("KV: write at position " + std::to_string(pos) + " of sequence " +
                          std::to_string(id) + " outside its reserved room");
  }
  const Block& b = blocks[size_t(s.table[size_t(pos / B)])];
  assert(b.where == Where::Dram && !b.full);  // positions past length live in private DRAM blocks
  uint8_t* slice = arena.data() + size_t(b.frame) * L.block_bytes + size_t(layer) * L.slice_bytes;
  const int hd = L.head_dim;
  float rk[512];
  for (int h = 0; h < L.n_kv_heads; ++h) {
    const float* kh = k + h * hd;
    if (L.rotated) rotate(kh, hd, rk), kh = rk;
    encode_token(L, kh, v + h * hd, slice + size_t(h) * L.head_bytes, pos % B);
  }
}

const uint8_t* PagedKvImpl::slice_ptr(const Block& b, int layer) const {
  if (b.frame >= 0) return frame_ptr(b.frame) + size_t(layer) * L.slice_bytes;
  const size_t set = size_t(layer % sets);
  return staging.data() + (set * size_t(stage_cap) + size_t(b.stage)) * L.slice_bytes;
}

void PagedKvImpl::attend(SeqId id, int layer, int kvh, int pos0, int n_tok, int group,
                         const float* q, int64_t q_stride, float* out, int64_t out_stride,
                         int window, int horizon) const {
  constexpr int kMaxRows = 8;  // rows whose state stays on the stack while blocks stream past
  const Seq& s = seqs[size_t(id)];
  const int hd = L.head_dim, B = L.block_tokens;
  if (!s.error.empty()) {
    for (int t = 0; t < n_tok; ++t)
      std::memset(out + t * out_stride, 0, sizeof(float) * size_t(group * hd));
    return;
  }
  // Without a window the tile kernels take every row of a block at once,
  // segment by segment (split-K's order). A sliding window (gemma3's local
  // layers) starts each token's scan at its own position: one token's rows
  // at a time, through a view of the block shifted to that start. Tokens
  // whose window still reaches position 0 (p < window, causal) see exactly
  // what a causal row sees and take the tiles too; which path a token takes
  // depends on its position alone, so chunking, batching and decoding still
  // give it the same bits.
  if (const AttendTileFn tile = kern->tile_for_type(L.type); tile && window <= 0) {
    attend_tiled(tile, s, layer, kvh, pos0, n_tok, group, q, q_stride, out, out_stride, horizon);
    return;
  } else if (tile && horizon <= 0 && pos0 < window) {
    const int whole = std::min(n_tok, window - pos0);  // tokens pos0 .. window - 1
    attend_tiled(tile, s, layer, kvh, pos0, whole, group, q, q_stride, out, out_stride, horizon);
    if (whole == n_tok) return;
    q += whole * q_stride, out += whole * out_stride, pos0 += whole, n_tok -= whole;
  }
  const AttendBlockFn fn = kern->for_type(L.type);
  const AttendRowsFn rows_fn = kern->rows_for_type(L.type);
  float m[kMaxRows], l[kMaxRows];
  alignas(64) float acc[kMaxRows * 512];
  alignas(64) float rq[kMaxRows * 512];  // rotated queries, when keys are stored rotated
  const int rows = n_tok * group;
  // Token t attends positions [lo(t), end(t)): lo = 0 without a window, end
  // = pos0 + t + 1 (causal) or the horizon (every token alike); a window
  // with a horizon is symmetric, window - 1 positions each side.
  auto first_pos = [&](int t) { return window > 0 ? std::max(0, pos0 + t + 1 - window) : 0; };
  auto end_pos = [&](int t) {
    if (horizon <= 0) return pos0 + t + 1;
    return window > 0 ? std::min(horizon, pos0 + t + window) : horizon;
  };
  // Whole tokens per chunk when a group fits, so a token's rows share block reads.
  const int chunk = group <= kMaxRows ? kMaxRows / group * group : kMaxRows;
  for (int r0 = 0; r0 < rows; r0 += chunk) {
    const int nr = std::min(chunk, rows - r0);
    const float* qrow[kMaxRows];
    for (int r = 0; r < nr; ++r) {
      attend_start(hd, &m[r], &l[r], acc + r * hd);
      const int t = (r0 + r) / group, g = (r0 + r) % group;
      qrow[r] = q + t * q_stride + g * hd;
      if (L.rotated) rotate(qrow[r], hd, rq + r * hd), qrow[r] = rq + r * hd;
    }
    const int ctx_max = end_pos((r0 + nr - 1) / group);  // the chunk's last row sees the most
    const int blk_min = first_pos(r0 / group) / B;       // its first row starts the earliest
    for (int blk = blk_min; blk * B < ctx_max; ++blk) {
      const Block& b = blocks[size_t(s.table[size_t(blk)])];
      if ((blk + 1) * B < ctx_max) prefetch_next(s, blk + 1, layer, kvh);
      const HeadBlock whole = head_block(L, slice_ptr(b, layer), kvh);
      for (int r = 0; r < nr;) {
        // Rows of one token (its group's query heads) see the same positions.
        const int t = (r0 + r) / group;
        int r_end = r + 1;
        while (r_end < nr && (r0 + r_end) / group == t) ++r_end;
        // This block's part of [lo, n_ctx), as block-local tokens [i0, i1).
        const int n_ctx = end_pos(t);
        const int i0 = std::max(0, first_pos(t) - blk * B);
        const int i1 = std::min(B, n_ctx - blk * B);
        if (i1 > i0) {
          HeadBlock hb = whole;
          if (i0 > 0) {  // rows are token-strided: start the view at token i0
            hb.k += size_t(i0) * L.k_row, hb.v += size_t(i0) * L.v_row;
            if (hb.ks) hb.ks += i0, hb.vs += i0;
          }
          const int n = i1 - i0;
          if (rows_fn) {
            rows_fn(L, hb, n, r_end - r, qrow + r, m + r, l + r, acc + r * hd);
          } else {
            for (int i = r; i < r_end; ++i) fn(L, hb, n, qrow[i], &m[i], &l[i], acc + i * hd);
          }
        }
        r = r_end;
      }
    }
    for (int r = 0; r < nr; ++r) {
      const int t = (r0 + r) / group, g = (r0 + r) % group;
      attend_finish(hd, l[r], acc + r * hd, out + t * out_stride + g * hd);
    }
  }
}

// Rows' query pointers (rotated when keys are stored rotated) and context
// lengths, for rows [r0, r0 + nr) of tokens pos0.. with `group` rows each.
namespace {
struct RowSet {
  const float* q[kMaxTileRows];
  int ctx[kMaxTileRows];
};
struct TileState {
  std::vector<float> m, l, acc, sm, sl, sacc, rq;
  void fit(int hd) {
    const size_t n = size_t(kMaxTileRows) * size_t(hd);
    if (acc.size() >= n) return;
    m.resize(kMaxTileRows), l.resize(kMaxTileRows), sm.resize(kMaxTileRows);
    sl.resize(kMaxTileRows), acc.resize(n), sacc.resize(n), rq.resize(n);
  }
};
TileState& tile_state(int hd) {
  thread_local TileState st;
  st.fit(hd);
  return st;
}
}  // namespace

void PagedKvImpl::prefetch_next(const Seq& s, int blk, int layer, int kvh) const {
  const Block& b = blocks[size_t(s.table[size_t(blk)])];
  prefetch_head_area(L, head_block(L, slice_ptr(b, layer), kvh));
}

void PagedKvImpl::tile_blocks(AttendTileFn tile, const Seq& s, int layer, int kvh, int b0, int b1,
                              int nr, const int* ctx, const float* const* q, float* m, float* l,
                              float* acc) const {
  const int hd = L.head_dim, B = L.block_tokens;
  int ctx_max = 0, n[kMaxTileRows];
  for (int r = 0; r < nr; ++r) {
    attend_start(hd, &m[r], &l[r], acc + size_t(r) * hd);
    ctx_max = std::max(ctx_max, ctx[r]);
  }
  b1 = std::min(b1, (ctx_max + B - 1) / B);
  if (b1 <= b0) return;
  if (const AttendSpanFn span = kern->span_for_type(L.type)) {
    HeadBlock hbs[64];
    for (int blk0 = b0; blk0 < b1; blk0 += 64) {
      const int nb = std::min(64, b1 - blk0);
      for (int i = 0; i < nb; ++i)
        hbs[i] = head_block(L, slice_ptr(blocks[size_t(s.table[size_t(blk0 + i)])], layer), kvh);
      for (int r = 0; r < nr; ++r) n[r] = std::max(0, ctx[r] - blk0 * B);
      span(L, hbs, nb, nr, n, q, m, l, acc);
    }
    return;
  }
  for (int blk = b0; blk < b1; ++blk) {
    const Block& b = blocks[size_t(s.table[size_t(blk)])];
    if ((blk + 1) * B < ctx_max) prefetch_next(s, blk + 1, layer, kvh);
    for (int r = 0; r < nr; ++r) n[r] = std::clamp(ctx[r] - blk * B, 0, B);
    tile(L, head_block(L, slice_ptr(b, layer), kvh), nr, n, q, m, l, acc);
  }
}

// Up to kMaxTileRows rows (whole tokens' groups when they fit) go through each
// block together: the block is decoded once for all of them, each row seeing
// the positions up to its own token (the causal mask, per row), blocks past
// the last row's position never read. Segment by segment: each segment's
// state is computed from scratch and merged into the running one in order,
// exactly as the split-K decode (attend_segment) does.
void PagedKvImpl::attend_tiled(AttendTileFn tile, const Seq& s, int layer, int kvh, int pos0,
                               int n_tok, int group, const float* q, int64_t q_stride, float* out,
                               int64_t out_stride, int horizon) const {
  const int hd = L.head_dim, SB = segment_blocks(), ST = SB * L.block_tokens;
  TileState& st = tile_state(hd);
  const int rows = n_tok * group;
  const int chunk = group <= kMaxTileRows ? kMaxTileRows / group * group : kMaxTileRows;
  RowSet rs;
  for (int r0 = 0; r0 < rows; r0 += chunk) {
    const int nr = std::min(chunk, rows - r0);
    for (int r = 0; r < nr; ++r) {
      const int t = (r0 + r) / group, g = (r0 + r) % group;
      rs.ctx[r] = horizon > 0 ? horizon : pos0 + t + 1;
      rs.q[r] = q + t * q_stride + g * hd;
      if (L.rotated)
        rotate(rs.q[r], hd, st.rq.data() + size_t(r) * hd), rs.q[r] = st.rq.data() + size_t(r) * hd;
      attend_start(hd, &st.m[size_t(r)], &st.l[size_t(r)], st.acc.data() + size_t(r) * hd);
    }
    const int n_seg = (rs.ctx[nr - 1] + ST - 1) / ST;
    for (int seg = 0; seg < n_seg; ++seg) {
      tile_blocks(tile, s, layer, kvh, seg * SB, (seg + 1) * SB, nr, rs.ctx, rs.q, st.sm.data(),
                  st.sl.data(), st.sacc.data());
      for (int r = 0; r < nr; ++r)
        attend_merge(hd, st.sm[size_t(r)], st.sl[size_t(r)], st.sacc.data() + size_t(r) * hd,
                     &st.m[size_t(r)], &st.l[size_t(r)], st.acc.data() + size_t(r) * hd);
    }
    for (int r = 0; r < nr; ++r) {
      const int t = (r0 + r) / group, g = (r0 + r) % group;
      attend_finish(hd, st.l[size_t(r)], st.acc.data() + size_t(r) * hd,
                    out + t * out_stride + g * hd);
    }
  }
}

void PagedKvImpl::attend_segment(SeqId id, int layer, int kvh, int pos0, int n_tok, int group,
                                 const float* q, int64_t q_stride, int segment, float* m, float* l,
                                 float* acc) const {
  const Seq& s = seqs[size_t(id)];
  const int hd = L.head_dim, rows = n_tok * group, SB = segment_blocks();
  const AttendTileFn tile = kern->tile_for_type(L.type);
  if (!tile) throw std::logic_error("attend_segment without tile kernels");
  if (rows > kMaxTileRows) throw std::logic_error("attend_segment: too many rows");
  if (!s.error.empty()) {  // a failed sequence attends nothing: zeros come out
    for (int r = 0; r < rows; ++r) attend_start(hd, &m[r], &l[r], acc + size_t(r) * hd);
    return;
  }
  TileState& st = tile_state(hd);
  RowSet rs;
  for (int r = 0; r < rows; ++r) {
    const int t = r / group, g = r % group;
    rs.ctx[r] = pos0 + t + 1;
    rs.q[r] = q + t * q_stride + g * hd;
    if (L.rotated)
      rotate(rs.q[r], hd, st.rq.data() + size_t(r) * hd), rs.q[r] = st.rq.data() + size_t(r) * hd;
  }
  tile_blocks(tile, s, layer, kvh, segment * SB, (segment + 1) * SB, rows, rs.ctx, rs.q, m, l, acc);
}

}  // namespace tern::kv
