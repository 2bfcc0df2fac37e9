// The forward pass over a batch. Linear layers run once over all T rows of
// the batch (weights read once per step for every sequence); attention runs
// per token against its own sequence's KV, causally (an encoder's: over the
// whole entry, which the scheduler keeps in one step).
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

// y (T, d) is a block's output (in the workspace's tmp): its bias added,
// gemma normalises it (in place) before the residual add; an encoder
// LayerNorms the sum.
void Model::residual_add(const std::vector<float>& post_norm, const std::vector<float>& bias,
                         float* y, int T, TaskPool& pool, const std::vector<float>& ln_w,
                         const std::vector<float>& ln_b) {
  const int d = cfg_.d_model;
  float* x = ws_.x.data();
  for_each_token(pool, T, d, [&](int t) {
    float* xr = x + size_t(t) * d;
    float* yr = y + size_t(t) * d;
    if (!bias.empty())
      for (int i = 0; i < d; ++i) yr[i] += bias[size_t(i)];
    if (!post_norm.empty()) kernels::rmsnorm(yr, post_norm.data(), yr, d, cfg_.norm_eps);
    for (int i = 0; i < d; ++i) xr[i] += yr[i];
    if (!ln_w.empty()) kernels::layernorm(xr, ln_w.data(), ln_b.data(), xr, d, cfg_.norm_eps);
  });
}

const float* Model::block_input(const std::vector<float>& w, int T, TaskPool& pool) {
  if (cfg_.encoder) return ws_.x.data();  // post-norm: x is normalised already
  const int d = cfg_.d_model;
  for_each_token(pool, T, d, [&](int t) {
    kernels::rmsnorm(ws_.x.data() + size_t(t) * d, w.data(), ws_.xn.data() + size_t(t) * d, d,
                     cfg_.norm_eps);
  });
  return ws_.xn.data();
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

// BERT's input: x (T, d) += token type 0's row + its position's row, then
// LayerNormed (xn holds the position rows).
void Model::encoder_inputs(int T, TaskPool& pool) {
  const int d = cfg_.d_model;
  for_each_token(pool, T, 2 * d, [&](int t) {
    float* xr = ws_.x.data() + size_t(t) * d;
    if (!type_row_.empty())
      for (int i = 0; i < d; ++i) xr[i] += type_row_[size_t(i)];
    if (pos_embd_) {
      float* row = ws_.xn.data() + size_t(t) * d;
      const size_t pos = size_t(ws_.tok_pos[size_t(t)]);
      kernels::dequantize_row(pos_embd_->type, pos_embd_->data + pos * pos_embd_->row_bytes(), row,
                              d);
      for (int i = 0; i < d; ++i) xr[i] += row[i];
    }
    kernels::layernorm(xr, embd_norm_.data(), embd_norm_b_.data(), xr, d, cfg_.norm_eps);
  });
}

// Layer l's attention up to the queries' plan: q, k and v, RoPE, K and V
// written to the cache.
void Model::attention_in(int l, const Batch& batch, kv::PagedKv& kv, TaskPool& pool) {
  const LayerWeights& L = layers_[size_t(l)];
  const ModelConfig& c = cfg_;
  const int T = batch.total_tokens();
  const int d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim;
  Workspace& w = ws_;

  // xn = rmsnorm(x) * attn_norm (an encoder: x); q, k, v = xn @ Wq, Wk, Wv
  kernels::quantize_activations(block_input(L.attn_norm, T, pool), T, d, w.qa, pool);
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
    if (!L.bq.empty()) {
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
    if (c.rope) kernels::rope(qt, c.n_heads, kt, c.n_kv_heads, w.tok_pos[size_t(t)], rope);
    for (int i = 0; i < qd; ++i) qt[i] *= q_scale;  // Q pre-scaled (1/sqrt(head_dim) by default)
  });
  // Append each token's K and V to its sequence's blocks (encoded in the
  // cache's KV type; distinct positions, so tokens encode in parallel).
  for_each_token(pool, T, 8 * kvd, [&](int t) {
    const SeqId seq = batch.entries[size_t(w.tok_entry[size_t(t)])].seq;
    kv.write(seq, l, w.tok_pos[size_t(t)], w.k.data() + size_t(t) * kvd,
             w.v.data() + size_t(t) * kvd);
  });

  // attn = softmax(q K^T) V per query head, against each token's own
  // sequence (GQA: a KV head serves `group` query heads), in pool tasks.
  w.attn_plan.plan(batch, w.tok_pos,
                   {.n_kv_heads = c.n_kv_heads,
                    .group = c.n_heads / c.n_kv_heads,
                    .head_dim = hd,
                    .window = c.layer_window(l),
                    .causal = c.causal},
                   kv);
}

// x += attn @ Wo, once every part of the attention ran.
void Model::attention_out(int l, const Batch& batch, TaskPool& pool) {
  const LayerWeights& L = layers_[size_t(l)];
  const int T = batch.total_tokens();
  Workspace& w = ws_;
  kernels::quantize_activations(w.attn.data(), T, cfg_.q_dim(), w.qa, pool);
  if (!lora_linear(l, batch, {{LoraSlot::O, &L.wo, w.tmp.data()}}, pool)) {
    kernels::matmul(L.wo, w.qa, w.tmp.data(), pool);
  }
  residual_add(L.post_attn_norm, L.bo, w.tmp.data(), T, pool, L.attn_out_norm, L.attn_out_norm_b);
}

void Model::ffn_block(int l, const Batch& batch, TaskPool& pool) {
  const int T = batch.total_tokens();
  const LayerWeights& L = layers_[size_t(l)];
  const ModelConfig& c = cfg_;
  const int d = c.d_model, ff = c.d_ff;
  Workspace& w = ws_;
  // x += (act(xn @ Wgate) * (xn @ Wup)) @ Wdown, xn = rmsnorm(x) * ffn_norm;
  // act is silu (SwiGLU) or gelu_tanh (GeGLU), as the config says. BERT's
  // FFN is ungated: x += gelu(x @ Wup + b_up) @ Wdown + b_down.
  kernels::quantize_activations(block_input(L.ffn_norm, T, pool), T, d, w.qa, pool);
  if (!c.gated_ffn) {
    if (!lora_linear(l, batch, {{LoraSlot::Up, &L.w_up, w.gate.data()}}, pool))
      kernels::matmul(L.w_up, w.qa, w.gate.data(), pool);
    for_each_token(pool, T, 4 * ff, [&](int t) {
      float* g = w.gate.data() + size_t(t) * ff;
      if (!L.b_up.empty())
        for (int i = 0; i < ff; ++i) g[i] += L.b_up[size_t(i)];
      kernels::gelu(g, ff);
    });
  } else {
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
  }
  kernels::quantize_activations(w.gate.data(), T, ff, w.qa, pool);
  if (!lora_linear(l, batch, {{LoraSlot::Down, &L.w_down, w.tmp.data()}}, pool)) {
    kernels::matmul(L.w_down, w.qa, w.tmp.data(), pool);
  }
  residual_add(L.post_ffn_norm, L.b_down, w.tmp.data(), T, pool, L.layer_out_norm,
               L.layer_out_norm_b);
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
  // Gather the rows that want logits, final-norm them into xn (rows, d);
  // the entries that want hidden states get every row final-normed into
  // out.hidden, and no logits.
  out.n_vocab = cfg_.n_vocab;
  out.d_model = d;
  out.first_row.assign(batch.entries.size(), -1);
  out.n_rows.assign(batch.entries.size(), 0);
  out.first_hidden.assign(batch.entries.size(), -1);
  int hidden = 0;
  for (const BatchEntry& e : batch.entries)
    if (e.logits == LogitsMode::Hidden) hidden += int(e.tokens.size());
  out.hidden.resize(size_t(hidden) * size_t(d));
  int rows = 0, t = 0;
  hidden = 0;
  for (size_t i = 0; i < batch.entries.size(); ++i) {
    const BatchEntry& e = batch.entries[i];
    const int n = int(e.tokens.size());
    if (e.logits == LogitsMode::Hidden) {
      out.first_hidden[i] = hidden;
      for (int j = 0; j < n; ++j, ++hidden) {
        if (cfg_.encoder) {  // the last layer's output norm was the final one
          std::copy_n(w.x.data() + size_t(t + j) * d, d, out.hidden.data() + size_t(hidden) * d);
          continue;
        }
        kernels::rmsnorm(w.x.data() + size_t(t + j) * d, out_norm_.data(),
                         out.hidden.data() + size_t(hidden) * d, d, cfg_.norm_eps);
      }
      t += n;
      continue;
    }
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

bool Model::forward(const Batch& batch, kv::PagedKv& kv, StepOutput& out, TaskPool& pool,
                    const YieldCheck* yield) {
  // One pass pauses at a time: those that run meanwhile do not yield.
  if (paused_ && yield) throw InvalidArgument("a yielding forward pass while another is paused");
  const int T = batch.total_tokens();
  // Validate everything before touching any state.
  for (size_t i = 0; i < batch.entries.size(); ++i) {
    const BatchEntry& e = batch.entries[i];
    if (!cfg_.generates() && e.logits != LogitsMode::Hidden && e.logits != LogitsMode::None)
      throw InvalidArgument(cfg_.arch + " is an embedding model: it has no LM head for logits");
    for (size_t j = 0; j < i; ++j) {
      if (batch.entries[j].seq == e.seq) throw InvalidArgument("sequence appears twice in a batch");
    }
    for (int32_t id : e.tokens) {
      if (id < 0 || id >= cfg_.n_vocab) {
        throw InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary (" +
                              std::to_string(cfg_.n_vocab) + ")");
      }
    }
    if (e.skip < 0 || (e.skip > 0 && e.commit))
      throw InvalidArgument("a batch entry skipping written positions must not commit");
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
  for (const BatchEntry& e : batch.entries) kv.reserve(e.seq, e.skip + int(e.tokens.size()));
  ws_.ensure(cfg_, T);
  std::vector<SeqId>& seqs = ws_.seqs;
  seqs.clear();
  int t = 0;
  for (size_t i = 0; i < batch.entries.size(); ++i) {
    const BatchEntry& e = batch.entries[i];
    const int base = kv.length(e.seq) + e.skip;
    seqs.push_back(e.seq);
    for (size_t j = 0; j < e.tokens.size(); ++j, ++t) {
      ws_.tok_entry[size_t(t)] = int(i);
      ws_.tok_pos[size_t(t)] = base + int(j);
    }
  }
  if (T > 0) {
    kv.begin_step(seqs);
    embed(batch, ws_.x.data());
    if (cfg_.encoder) encoder_inputs(T, pool);
  }
  return run_layers(batch, kv, out, pool, 0, yield ? attention_parts(T) : 1, yield);
}

// A yielding pass cuts each layer's attention into parts of about an FFN
// block's cost, so that its pause points are no further apart at depth than
// at the start: a 512-token chunk at depth 2048-3584 of SmolLM2 spent
// 40-55 ms in one attention block against ~15 ms in the FFN on a 2-vCPU
// Zen 3, and a newcomer waited for the whole block. Attention's cost is the query rows
// times the positions they attend (QK and PV: 2 q_dim MACs a pair), at
// kAttentionMacCost times a weight MAC's time (the int8 GEMM runs at 2.5-3x
// the attention tiles' MAC rate on AVX2); the FFN's, 3 (gated) or 2 d_ff
// d_model MACs a token. A pass of under 64 tokens a part is not cut (a
// decode step's parts would cost more in joins than they save).
int Model::attention_parts(int T) const {
  constexpr double kAttentionMacCost = 2.5;
  constexpr int kMaxParts = 8, kMinTokensPerPart = 64;
  const int most = std::min(kMaxParts, T / kMinTokensPerPart);
  if (most <= 1) return 1;
  double attended = 0;  // positions attended, summed over the queries
  for (int t = 0; t < T; ++t) attended += double(ws_.tok_pos[size_t(t)] + 1);
  const double attn = kAttentionMacCost * attended * 2.0 * double(cfg_.q_dim());
  const double ffn = double(T) * (cfg_.gated_ffn ? 3.0 : 2.0) * double(cfg_.d_ff) * cfg_.d_model;
  return std::clamp(int(std::ceil(attn / ffn)), 1, most);
}

bool Model::resume(const Batch& batch, kv::PagedKv& kv, StepOutput& out, TaskPool& pool,
                   const YieldCheck* yield) {
  if (!paused_) throw InvalidArgument("resume() without a paused forward pass");
  std::swap(ws_, paused_ws_);
  paused_ = false;
  kv.resume_step();
  return run_layers(batch, kv, out, pool, paused_block_, paused_parts_, yield);
}

// Blocks from `first` on, then the commits and the logits; false when yield
// paused the pass after a block (its workspace set aside in paused_ws_, the
// KV's step suspended). A layer is parts + 1 blocks: its attention in
// `parts` (the first computes q, k, v and writes the KV; the last applies
// Wo), then its FFN. A pass resumed inside a layer's attention does not
// begin the layer again: its KV step kept the layer it was at.
bool Model::run_layers(const Batch& batch, kv::PagedKv& kv, StepOutput& out, TaskPool& pool,
                       int first, int parts, const YieldCheck* yield) {
  if (batch.total_tokens() > 0) {
    struct EndStep {  // closes the step on every path (waits for flash reads in flight)
      kv::PagedKv& kv;
      bool keep = false;  // paused: the step stays open, suspended
      ~EndStep() {
        if (!keep) kv.end_step();
      }
    } end_step{kv};
    const int per_layer = parts + 1;
    const int n_blocks = per_layer * cfg_.n_layers;
    for (int b = first; b < n_blocks; ++b) {
      const int l = b / per_layer, j = b % per_layer;
      if (j < parts) {
        if (j == 0) {
          kv.begin_layer(l);
          attention_in(l, batch, kv, pool);
        }
        ws_.attn_plan.run(batch, l, ws_.tok_pos, kv, ws_.q.data(), ws_.attn.data(), pool, j, parts);
        if (j == parts - 1) attention_out(l, batch, pool);
      } else {
        ffn_block(l, batch, pool);
      }
      if (yield && *yield && b + 1 < n_blocks && kv.can_suspend() && (*yield)(b, n_blocks)) {
        kv.suspend_step();
        end_step.keep = true;
        std::swap(ws_, paused_ws_);
        paused_ = true;
        paused_block_ = b + 1;
        paused_parts_ = parts;
        return false;
      }
    }
  }
  for (const BatchEntry& e : batch.entries)
    if (e.commit) kv.commit(e.seq, e.tokens);
  logits(batch, out, pool);
  return true;
}

std::vector<float> Model::project_pooled(std::vector<float> v) const {
  if (dense_2_.empty()) return v;
  const int d = cfg_.d_model, n = cfg_.dense_out;
  std::vector<float> mid(static_cast<size_t>(n)), out(static_cast<size_t>(d));
  for (int r = 0; r < n; ++r) {
    double s = 0;
    for (int i = 0; i < d; ++i) s += double(dense_2_[size_t(r) * d + size_t(i)]) * v[size_t(i)];
    mid[size_t(r)] = float(s);
  }
  for (int r = 0; r < d; ++r) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += double(dense_3_[size_t(r) * n + size_t(i)]) * mid[size_t(i)];
    out[size_t(r)] = float(s);
  }
  return out;
}

}  // namespace tern
