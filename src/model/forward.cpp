// The forward pass over a batch. Linear layers run once over all T rows of
// the batch (weights read once per step for every sequence); attention runs
// per token against its own sequence's KV, causally.
#include <algorithm>
#include <cmath>
#include <string>

#include "tern/core/error.h"
#include "tern/core/half.h"
#include "tern/core/task_pool.h"
#include "tern/kernels/dequant.h"
#include "tern/kernels/ops.h"
#include "tern/kv/paged_kv.h"
#include "tern/model/model.h"

namespace tern {
namespace {

// fn(t) for every token t of the batch, `width` values of work each: on the
// pool in tasks of about 8K values when there are at least two of them
// (prefill, batched decode), inline otherwise (a dispatch costs ~1 us).
template <typename F>
void for_each_token(TaskPool& pool, int T, int width, F&& fn) {
  const int grain = std::max(1, 8192 / std::max(1, width));
  if (T < 2 * grain) {
    for (int t = 0; t < T; ++t) fn(t);
    return;
  }
  pool.parallel_for(T, grain, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) fn(int(t));
  });
}

}  // namespace

// y (T, d) is a block's output (in the workspace's tmp); gemma normalises it
// (in place) before the residual add.
void Model::residual_add(const std::vector<float>& post_norm, float* y, int T, TaskPool& pool) {
  const int d = cfg_.d_model;
  float* x = ws_.x.data();
  for_each_token(pool, T, d, [&](int t) {
    float* xr = x + size_t(t) * d;
    float* yr = y + size_t(t) * d;
    if (!post_norm.empty()) kernels::rmsnorm(yr, post_norm.data(), yr, d, cfg_.norm_eps);
    for (int i = 0; i < d; ++i) xr[i] += yr[i];
  });
}

void Workspace::ensure(const ModelConfig& c, int tokens) {
  if (tokens <= capacity) return;
  const int cap = std::max(tokens, 16);
  const size_t T = size_t(cap);
  x = AlignedBuffer<float>(T * c.d_model);
  xn = AlignedBuffer<float>(T * c.d_model);
  q = AlignedBuffer<float>(T * c.q_dim());
  k = AlignedBuffer<float>(T * c.kv_dim());
  v = AlignedBuffer<float>(T * c.kv_dim());
  attn = AlignedBuffer<float>(T * c.q_dim());
  gate = AlignedBuffer<float>(T * c.d_ff);
  up = AlignedBuffer<float>(T * c.d_ff);
  tmp = AlignedBuffer<float>(T * std::max({c.d_model, c.d_ff, c.q_dim()}));
  tok_entry.assign(T, 0);
  tok_pos.assign(T, 0);
  capacity = cap;
}

void Model::embed(const Batch& batch, float* x) const {
  const int d = cfg_.d_model;
  const size_t row_bytes = embd_->row_bytes();
  int t = 0;
  for (const BatchEntry& e : batch.entries) {
    auto run = e.embeddings.begin();  // the next media run of this entry
    for (size_t j = 0; j < e.tokens.size(); ++j, ++t) {
      float* xr = x + size_t(t) * d;
      while (run != e.embeddings.end() && int(j) >= run->offset + run->n) ++run;
      if (run != e.embeddings.end() && int(j) >= run->offset) {
        // A media position: its projected row, as llama.cpp feeds embeddings (unscaled).
        std::copy_n(run->rows + size_t(int(j) - run->offset) * d, d, xr);
        continue;
      }
      kernels::dequantize_row(embd_->type, embd_->data + size_t(e.tokens[j]) * row_bytes, xr, d);
      if (cfg_.embed_scale != 1.0f) {
        for (int i = 0; i < d; ++i) xr[i] *= cfg_.embed_scale;
      }
    }
  }
}

void Model::attention_block(int l, const Batch& batch, kv::PagedKv& kv, TaskPool& pool) {
  const LayerWeights& L = layers_[size_t(l)];
  const ModelConfig& c = cfg_;
  const int T = batch.total_tokens();
  const int d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim;
  Workspace& w = ws_;

  // xn = rmsnorm(x) * attn_norm; q, k, v = xn @ Wq, Wk, Wv
  for_each_token(pool, T, d, [&](int t) {
    kernels::rmsnorm(w.x.data() + size_t(t) * d, L.attn_norm.data(), w.xn.data() + size_t(t) * d, d,
                     c.norm_eps);
  });
  kernels::quantize_activations(w.xn.data(), T, d, w.qa, pool);
  if (!lora_linear(l, batch,
                   {{LoraSlot::Q, &L.wq, w.q.data()},
                    {LoraSlot::K, &L.wk, w.k.data()},
                    {LoraSlot::V, &L.wv, w.v.data()}},
                   pool)) {
    kernels::matmul({{&L.wq, w.q.data()}, {&L.wk, w.k.data()}, {&L.wv, w.v.data()}}, w.qa, pool);
  }

  // Local (sliding-window) layers have their own RoPE base (gemma3).
  const kernels::RopeParams rope{hd, c.rope_dims, c.layer_rope_theta(l),
                                 c.rope_style == RopeStyle::NeoX,
                                 rope_freqs_.empty() ? nullptr : rope_freqs_.data()};
  const float q_scale = c.q_scale();
  for_each_token(pool, T, 2 * (qd + kvd), [&](int t) {  // rope: cos/sin weigh in
    float* qt = w.q.data() + size_t(t) * qd;
    float* kt = w.k.data() + size_t(t) * kvd;
    float* vt = w.v.data() + size_t(t) * kvd;
    if (c.qkv_bias) {
      for (int i = 0; i < qd; ++i) qt[i] += L.bq[size_t(i)];
      for (int i = 0; i < kvd; ++i) kt[i] += L.bk[size_t(i)], vt[i] += L.bv[size_t(i)];
    }
    if (c.qk_norm) {
      for (int h = 0; h < c.n_heads; ++h) {
        kernels::rmsnorm(qt + h * hd, L.q_norm.data(), qt + h * hd, hd, c.norm_eps);
      }
      for (int h = 0; h < c.n_kv_heads; ++h) {
        kernels::rmsnorm(kt + h * hd, L.k_norm.data(), kt + h * hd, hd, c.norm_eps);
      }
    }
    kernels::rope(qt, c.n_heads, kt, c.n_kv_heads, w.tok_pos[size_t(t)], rope);
    for (int i = 0; i < qd; ++i) qt[i] *= q_scale;  // Q pre-scaled (1/sqrt(head_dim) by default)
  });
  // Append each token's K and V to its sequence's blocks (encoded in the
  // cache's KV type; distinct positions, so tokens encode in parallel).
  for_each_token(pool, T, 8 * kvd, [&](int t) {
    const SeqId seq = batch.entries[size_t(w.tok_entry[size_t(t)])].seq;
    kv.write(seq, l, w.tok_pos[size_t(t)], w.k.data() + size_t(t) * kvd,
             w.v.data() + size_t(t) * kvd);
  });

  // attn[t] = softmax(q_t . K[lo..pos]) V[lo..pos], per head (lo = 0, or
  // pos - window + 1 on a local layer); GQA maps query
  // head h to kv head h / group. A task is one kv head for a block of
  // consecutive tokens of one sequence: the block's group x tokens queries
  // share each K/V row read. Blocks run latest (longest) first. A decoding
  // token (one per sequence), or a prompt chunk of at most one block of
  // tokens (a server's chunk deep in a long prompt), whose context spans
  // several of the KV's segments is split instead (split-K): one task per kv
  // head and segment, then a merge per kv head in segment order, which is
  // what attend() does within one task, so the numbers are the same either
  // way. (Unsplit, a 2-token chunk at depth 4096 was n_kv_heads long tasks:
  // 3 on 2 workers for SmolLM2, one worker idle a third of the time.)
  const int group = c.n_heads / c.n_kv_heads;
  const int window = c.layer_window(l);  // 0: attend the whole prefix
  const int tok_block = std::max(1, 32 / group);
  // Local layers' tokens each start at their own position: never split.
  const bool split_ok = kv.can_split() && group <= kv::kMaxTileRows && window <= 0;
  const int seg_tok = kv.attend_segment_tokens();
  // One (kvh, segment) of a token: m, l and acc for its group's rows.
  const size_t part_stride = size_t(group) * size_t(hd + 2);
  w.attn_blocks.clear();
  w.attn_splits.clear();
  size_t part = 0;
  {
    int t = 0;
    for (size_t ei = 0; ei < batch.entries.size(); ++ei) {
      const int n = int(batch.entries[ei].tokens.size());
      const int ctx = w.tok_pos[size_t(t)] + n;
      const auto& runs = batch.entries[ei].embeddings;
      const bool bidir = std::any_of(runs.begin(), runs.end(),
                                     [](const EmbeddingRun& r) { return r.bidirectional; });
      if (split_ok && !bidir && n <= tok_block && ctx > seg_tok) {
        const int n_seg = (ctx + seg_tok - 1) / seg_tok;
        w.attn_splits.push_back({int(ei), t, n, n_seg, part});
        part += size_t(n_seg) * size_t(c.n_kv_heads) * size_t(n) * part_stride;
      } else {
        // Causal stretches in blocks; a bidirectional run's tokens one by one,
        // each attending up to the run's end.
        auto causal = [&](int j0, int j1) {
          for (int j = j0; j < j1; j += tok_block) {
            const int t0 = t + j;
            w.attn_blocks.push_back(
                {int(ei), t0, std::min(tok_block, j1 - j), w.tok_pos[size_t(t0)]});
          }
        };
        int j = 0;
        for (const EmbeddingRun& r : batch.entries[ei].embeddings) {
          if (!r.bidirectional) continue;
          causal(j, r.offset);
          const int last = w.tok_pos[size_t(t + r.offset + r.n - 1)];
          for (int k = r.offset; k < r.offset + r.n; ++k)
            w.attn_blocks.push_back({int(ei), t + k, 1, last});
          j = r.offset + r.n;
        }
        causal(j, n);
      }
      t += n;
    }
  }
  if (w.attn_part.size() < part) w.attn_part.resize(part);
  const int64_t n_block_tasks = int64_t(w.attn_blocks.size()) * c.n_kv_heads;
  int64_t n_split_tasks = 0;
  for (const auto& sp : w.attn_splits) n_split_tasks += int64_t(sp.n_seg) * c.n_kv_heads;
  pool.run(n_block_tasks + n_split_tasks, [&](int64_t task, int) {
    if (task < n_block_tasks) {
      const int kvh = int(task % c.n_kv_heads);
      const auto& bt = w.attn_blocks[w.attn_blocks.size() - 1 - size_t(task / c.n_kv_heads)];
      const size_t at = size_t(bt.t0) * qd + size_t(kvh) * group * hd;
      kv.attend(batch.entries[size_t(bt.entry)].seq, l, kvh, bt.pos0, bt.n_tok, group,
                w.q.data() + at, qd, w.attn.data() + at, qd, window);
      return;
    }
    int64_t k = task - n_block_tasks;
    size_t si = 0;
    while (k >= int64_t(w.attn_splits[si].n_seg) * c.n_kv_heads) {
      k -= int64_t(w.attn_splits[si].n_seg) * c.n_kv_heads;
      ++si;
    }
    const auto& sp = w.attn_splits[si];
    const int kvh = int(k / sp.n_seg), seg = int(k % sp.n_seg), rows = sp.n_tok * group;
    const size_t stride = size_t(sp.n_tok) * part_stride;
    float* st = w.attn_part.data() + sp.off + (size_t(kvh) * sp.n_seg + size_t(seg)) * stride;
    const size_t at = size_t(sp.t0) * qd + size_t(kvh) * group * hd;
    kv.attend_segment(batch.entries[size_t(sp.entry)].seq, l, kvh, w.tok_pos[size_t(sp.t0)],
                      sp.n_tok, group, w.q.data() + at, qd, seg, st, st + rows, st + 2 * rows);
  });
  if (!w.attn_splits.empty()) {
    pool.run(int64_t(w.attn_splits.size()) * c.n_kv_heads, [&](int64_t task, int) {
      const auto& sp = w.attn_splits[size_t(task / c.n_kv_heads)];
      const int kvh = int(task % c.n_kv_heads), rows = sp.n_tok * group;
      const size_t stride = size_t(sp.n_tok) * part_stride;
      float acc[512];  // head_dim <= 512 (the KV layout's limit)
      for (int r = 0; r < rows; ++r) {
        const int tk = r / group, g = r % group;
        float m = 0, lsum = 0;
        kv::attend_start(hd, &m, &lsum, acc);
        for (int seg = 0; seg < sp.n_seg; ++seg) {
          const float* st =
              w.attn_part.data() + sp.off + (size_t(kvh) * sp.n_seg + size_t(seg)) * stride;
          kv::attend_merge(hd, st[r], st[rows + r], st + 2 * rows + size_t(r) * hd, &m, &lsum, acc);
        }
        kv::attend_finish(
            hd, lsum, acc,
            w.attn.data() + size_t(sp.t0 + tk) * qd + size_t(kvh) * group * hd + size_t(g) * hd);
      }
    });
  }

  // x += attn @ Wo
  kernels::quantize_activations(w.attn.data(), T, qd, w.qa, pool);
  if (!lora_linear(l, batch, {{LoraSlot::O, &L.wo, w.tmp.data()}}, pool)) {
    kernels::matmul(L.wo, w.qa, w.tmp.data(), pool);
  }
  residual_add(L.post_attn_norm, w.tmp.data(), T, pool);
}

void Model::ffn_block(int l, const Batch& batch, TaskPool& pool) {
  const int T = batch.total_tokens();
  const LayerWeights& L = layers_[size_t(l)];
  const ModelConfig& c = cfg_;
  const int d = c.d_model, ff = c.d_ff;
  Workspace& w = ws_;
  // x += (act(xn @ Wgate) * (xn @ Wup)) @ Wdown, xn = rmsnorm(x) * ffn_norm;
  // act is silu (SwiGLU) or gelu_tanh (GeGLU), as the config says.
  for_each_token(pool, T, d, [&](int t) {
    kernels::rmsnorm(w.x.data() + size_t(t) * d, L.ffn_norm.data(), w.xn.data() + size_t(t) * d, d,
                     c.norm_eps);
  });
  kernels::quantize_activations(w.xn.data(), T, d, w.qa, pool);
  if (!lora_linear(
          l, batch,
          {{LoraSlot::Gate, &L.w_gate, w.gate.data()}, {LoraSlot::Up, &L.w_up, w.up.data()}},
          pool)) {
    kernels::matmul({{&L.w_gate, w.gate.data()}, {&L.w_up, w.up.data()}}, w.qa, pool);
  }
  const auto gated = c.act == Activation::GeluTanh ? kernels::geglu : kernels::swiglu;
  for_each_token(pool, T, 4 * ff, [&](int t) {  // an exp and a division a value
    const size_t o = size_t(t) * ff;
    gated(w.gate.data() + o, w.up.data() + o, w.gate.data() + o, ff);
  });
  kernels::quantize_activations(w.gate.data(), T, ff, w.qa, pool);
  if (!lora_linear(l, batch, {{LoraSlot::Down, &L.w_down, w.tmp.data()}}, pool)) {
    kernels::matmul(L.w_down, w.qa, w.tmp.data(), pool);
  }
  residual_add(L.post_ffn_norm, w.tmp.data(), T, pool);
}

bool Model::lora_linear(int layer, const Batch& batch, std::initializer_list<LoraLinear> outs,
                        TaskPool& pool) {
  auto& rows = ws_.lora_rows;
  rows.clear();
  int t = 0;
  for (const BatchEntry& e : batch.entries) {
    const int n = int(e.tokens.size());
    if (e.lora && n > 0) rows.push_back({e.lora.adapter.get(), e.lora.scale, t, n});
    t += n;
  }
  if (rows.empty()) return false;
  ws_.lora.linear(layer, {outs.begin(), outs.size()}, rows, ws_.qa, pool);
  return true;
}

void Model::logits(const Batch& batch, StepOutput& out, TaskPool& pool) {
  const int d = cfg_.d_model;
  Workspace& w = ws_;
  // Gather the rows that want logits, final-norm them into xn (rows, d).
  out.n_vocab = cfg_.n_vocab;
  out.first_row.assign(batch.entries.size(), -1);
  out.n_rows.assign(batch.entries.size(), 0);
  int rows = 0, t = 0;
  for (size_t i = 0; i < batch.entries.size(); ++i) {
    const BatchEntry& e = batch.entries[i];
    const int n = int(e.tokens.size());
    const int first = e.logits == LogitsMode::All ? 0 : n - 1;
    if (e.logits != LogitsMode::None && n > 0) {
      out.first_row[i] = rows;
      out.n_rows[i] = n - first;
      for (int j = first; j < n; ++j, ++rows) {
        kernels::rmsnorm(w.x.data() + size_t(t + j) * d, out_norm_.data(),
                         w.xn.data() + size_t(rows) * d, d, cfg_.norm_eps);
      }
    }
    t += n;
  }
  out.logits.resize(size_t(rows) * size_t(cfg_.n_vocab));
  if (rows == 0) return;
  kernels::quantize_activations(w.xn.data(), rows, d, w.qa, pool);
  kernels::matmul(head_, w.qa, out.logits.data(), pool);
  if (const float cap = cfg_.final_softcap; cap > 0.0f) {
    for (float& z : out.logits) z = cap * std::tanh(z / cap);
  }
}

void Model::forward(const Batch& batch, kv::PagedKv& kv, StepOutput& out, TaskPool& pool) {
  const int T = batch.total_tokens();
  // Validate everything before touching any state.
  for (size_t i = 0; i < batch.entries.size(); ++i) {
    const BatchEntry& e = batch.entries[i];
    for (size_t j = 0; j < i; ++j) {
      if (batch.entries[j].seq == e.seq) throw InvalidArgument("sequence appears twice in a batch");
    }
    for (int32_t id : e.tokens) {
      if (id < 0 || id >= cfg_.n_vocab) {
        throw InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary (" +
                              std::to_string(cfg_.n_vocab) + ")");
      }
    }
    int end = 0;  // embedding runs: sorted, disjoint, inside the entry's tokens
    for (const EmbeddingRun& r : e.embeddings) {
      if (r.offset < end || r.n <= 0 || r.offset + r.n > int(e.tokens.size()) || !r.rows)
        throw InvalidArgument("embedding rows outside their entry's positions, or overlapping");
      end = r.offset + r.n;
    }
  }
  // Room for every new token (a no-op when the caller reserved already).
  // Throws InvalidArgument past the context, kv::KvFullError or
  // kv::KvIoError; lengths are unchanged then.
  for (const BatchEntry& e : batch.entries) kv.reserve(e.seq, int(e.tokens.size()));
  ws_.ensure(cfg_, T);
  std::vector<SeqId>& seqs = ws_.seqs;
  seqs.clear();
  int t = 0;
  for (size_t i = 0; i < batch.entries.size(); ++i) {
    const BatchEntry& e = batch.entries[i];
    const int base = kv.length(e.seq);
    seqs.push_back(e.seq);
    for (size_t j = 0; j < e.tokens.size(); ++j, ++t) {
      ws_.tok_entry[size_t(t)] = int(i);
      ws_.tok_pos[size_t(t)] = base + int(j);
    }
  }
  if (T > 0) {
    kv.begin_step(seqs);
    struct EndStep {  // closes the step on every path (waits for flash reads in flight)
      kv::PagedKv& kv;
      ~EndStep() { kv.end_step(); }
    } end_step{kv};
    embed(batch, ws_.x.data());
    for (int l = 0; l < cfg_.n_layers; ++l) {
      kv.begin_layer(l);
      attention_block(l, batch, kv, pool);
      ffn_block(l, batch, pool);
    }
  }
  for (const BatchEntry& e : batch.entries) kv.commit(e.seq, e.tokens);
  logits(batch, out, pool);
}

}  // namespace tern
