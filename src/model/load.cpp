// Loading a model: validate tensor shapes against the config, copy the small
// norm vectors, repack every linear weight into int4/int8 tiles.
#include <atomic>
#include <exception>
#include <mutex>
#include <string>

#include "tern/core/error.h"
#include "tern/core/log.h"
#include "tern/core/task_pool.h"
#include "tern/kernels/dequant.h"
#include "tern/model/model.h"

namespace tern {
namespace {

using kernels::PackedMatrix;
using kernels::WeightFormat;

std::string shape_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

const gguf::TensorInfo& expect(const gguf::GgufFile& f, const std::string& name,
                               std::vector<int64_t> dims) {
  const auto& t = f.tensor(name);
  if (t.dims != dims) {
    throw FormatError(f.path() + ": tensor '" + name + "' has shape " + shape_str(t.dims) +
                      ", expected " + shape_str(dims));
  }
  if (!kernels::can_dequantize(t.type)) {
    throw FormatError(f.path() + ": tensor '" + name + "' has type " + dtype_label(t.type) +
                      ", which tern cannot load yet (it loads " + kernels::loadable_types() + ")");
  }
  return t;
}

std::vector<float> load_vector(const gguf::GgufFile& f, const std::string& name, int n) {
  const auto& t = expect(f, name, {n});
  std::vector<float> v(static_cast<size_t>(n));
  kernels::dequantize_row(t.type, t.data, v.data(), n);
  return v;
}

// The layer's linear weights: GGUF name suffix, field, (n_out, n_in).
struct MatrixSpec {
  const char* name;
  PackedMatrix LayerWeights::*field;
  int n_out, n_in;
};

std::vector<MatrixSpec> layer_matrices(const ModelConfig& c) {
  const int d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim();
  return {{"attn_q.weight", &LayerWeights::wq, qd, d},
          {"attn_k.weight", &LayerWeights::wk, kvd, d},
          {"attn_v.weight", &LayerWeights::wv, kvd, d},
          {"attn_output.weight", &LayerWeights::wo, d, qd},
          {"ffn_gate.weight", &LayerWeights::w_gate, c.d_ff, d},
          {"ffn_up.weight", &LayerWeights::w_up, c.d_ff, d},
          {"ffn_down.weight", &LayerWeights::w_down, d, c.d_ff}};
}

// Where each packed matrix goes: every layer's in the order of
// layer_matrices(), then the head, one after the other in one WeightArena
// (huge pages; a layer's q, k and v are one contiguous stream).
struct WeightPlan {
  kernels::WeightArena arena;
  std::vector<uint8_t*> layer_dst;  // (n_layers * 7)
  uint8_t* head_dst = nullptr;
};

WeightPlan plan_weights(const gguf::GgufFile& f, const ModelConfig& c,
                        const std::vector<MatrixSpec>& specs, const LoadOptions& opts) {
  std::vector<size_t> sizes;
  size_t total = 0;
  auto add = [&](size_t bytes) {
    sizes.push_back(bytes);
    total += (bytes + 63) / 64 * 64;
  };
  for (int l = 0; l < c.n_layers; ++l) {
    for (const MatrixSpec& m : specs) {
      const auto& t = expect(f, "blk." + std::to_string(l) + "." + m.name, {m.n_in, m.n_out});
      const WeightFormat fmt = opts.force_format.value_or(kernels::default_format_for(t.type));
      add(kernels::packed_size(fmt, m.n_out, m.n_in));
    }
  }
  add(kernels::packed_size(opts.head_format, c.n_vocab, c.d_model));
  WeightPlan p{kernels::WeightArena(total), {}, nullptr};
  for (size_t i = 0; i + 1 < sizes.size(); ++i) p.layer_dst.push_back(p.arena.take(sizes[i]));
  p.head_dst = p.arena.take(sizes.back());
  return p;
}

PackedMatrix load_matrix(const gguf::GgufFile& f, const std::string& name, int n_out, int n_in,
                         const LoadOptions& opts, uint8_t* dst) {
  const auto& t = expect(f, name, {n_in, n_out});
  const WeightFormat fmt = opts.force_format.value_or(kernels::default_format_for(t.type));
  return kernels::pack_matrix(t.type, t.data, n_out, n_in, fmt, dst);
}

}  // namespace

std::unique_ptr<Model> Model::load(std::shared_ptr<const gguf::GgufFile> file,
                                   const LoadOptions& opts, TaskPool& pool,
                                   const std::function<void(float)>& progress) {
  std::unique_ptr<Model> m(new Model());
  m->file_ = std::move(file);
  const gguf::GgufFile& f = *m->file_;
  m->cfg_ = ModelConfig::from_gguf(f);
  const ModelConfig& c = m->cfg_;
  const int d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim();

  m->embd_ = &expect(f, "token_embd.weight", {d, c.n_vocab});
  // The embedding table is read row by row from the mapping; tell the kernel
  // access will be random so it does not read ahead the whole table.
  f.mapping().advise_random(size_t(m->embd_->data - f.file_bytes().data()), m->embd_->nbytes);

  m->layers_.resize(size_t(c.n_layers));
  const std::vector<MatrixSpec> specs = layer_matrices(c);
  const gguf::TensorInfo& head =
      c.tied_embeddings ? *m->embd_ : expect(f, "output.weight", {d, c.n_vocab});
  WeightPlan plan = plan_weights(f, c, specs, opts);
  m->weights_ = std::move(plan.arena);
  // Layers repack independently: one task per layer on the pool.
  std::atomic<int> done{0};
  std::exception_ptr error;
  std::mutex error_mu;
  pool.run(c.n_layers, [&](int64_t l, int) {
    try {
      LayerWeights& L = m->layers_[size_t(l)];
      const std::string b = "blk." + std::to_string(l) + ".";
      L.attn_norm = load_vector(f, b + "attn_norm.weight", d);
      L.ffn_norm = load_vector(f, b + "ffn_norm.weight", d);
      for (size_t i = 0; i < specs.size(); ++i) {
        const MatrixSpec& ms = specs[i];
        L.*ms.field = load_matrix(f, b + ms.name, ms.n_out, ms.n_in, opts,
                                  plan.layer_dst[size_t(l) * specs.size() + i]);
      }
      if (c.qkv_bias) {
        L.bq = load_vector(f, b + "attn_q.bias", qd);
        L.bk = load_vector(f, b + "attn_k.bias", kvd);
        L.bv = load_vector(f, b + "attn_v.bias", kvd);
      }
      if (c.post_norms) {
        L.post_attn_norm = load_vector(f, b + "post_attention_norm.weight", d);
        L.post_ffn_norm = load_vector(f, b + "post_ffw_norm.weight", d);
      }
      if (c.qk_norm) {
        L.q_norm = load_vector(f, b + "attn_q_norm.weight", c.head_dim);
        L.k_norm = load_vector(f, b + "attn_k_norm.weight", c.head_dim);
      }
    } catch (...) {
      std::lock_guard lock(error_mu);
      if (!error) error = std::current_exception();
    }
    const int n = ++done;
    if (progress && n % 4 == 0) progress(float(n) / float(c.n_layers + 1));
  });
  if (error) std::rethrow_exception(error);

  m->out_norm_ = load_vector(f, "output_norm.weight", d);
  if (f.find_tensor("rope_freqs.weight")) {
    m->rope_freqs_ = load_vector(f, "rope_freqs.weight", c.rope_dims / 2);
  }
  m->head_ =
      kernels::pack_matrix(head.type, head.data, c.n_vocab, d, opts.head_format, plan.head_dst);
  // Every architecture loaded here is a causal decoder: its head reads the last row.
  m->rank_head_ = RankHead::from_gguf(f, c.arch, /*causal=*/true);
  if (c.pooling == Pooling::Rank && !m->rank_head_) {
    log::get("model")->warn(
        "{}: pooling_type is rank but the file has no classification head "
        "(cls.output.weight); it cannot rerank",
        c.name);
    m->cfg_.pooling = Pooling::None;
  }
  // Every weight now lives in its repacked copy; release the mapping's pages
  // so the file costs no resident memory. Only embedding rows of tokens
  // actually seen fault back in, one row at a time.
  f.mapping().advise_dontneed(0, f.mapping().size());
  if (progress) progress(1.0f);
  log::get("model")->info(
      "{}: {} layers, d_model {}, {} heads ({} kv), vocab {}, {:.1f} MiB packed", c.name,
      c.n_layers, d, c.n_heads, c.n_kv_heads, c.n_vocab, double(m->packed_bytes()) / (1 << 20));
  return m;
}

size_t Model::packed_bytes() const {
  size_t n = head_.bytes();
  for (const auto& L : layers_) {
    for (const auto* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) {
      n += w->bytes();
    }
  }
  return n;
}

}  // namespace tern
