// Loading a model: validate tensor shapes against the config, copy the small
// norm vectors, repack every linear weight into the kernels' tiles.
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

// A small matrix in fp32: n_rows rows of n_in (GGUF dims {n_in, n_rows}).
std::vector<float> load_rows(const gguf::GgufFile& f, const std::string& name, int n_in,
                             int n_rows) {
  const auto& t = expect(f, name, {n_in, n_rows});
  std::vector<float> v(size_t(n_in) * size_t(n_rows));
  const size_t row_bytes = t.row_bytes();
  for (int r = 0; r < n_rows; ++r)
    kernels::dequantize_row(t.type, t.data + size_t(r) * row_bytes, v.data() + size_t(r) * n_in,
                            n_in);
  return v;
}

// The layer's linear weights: GGUF name suffix, field, (n_out, n_in); a
// matrix may be rows [row0, row0 + n_out) of a tensor of tensor_rows rows
// (a fused attn_qkv: Q, then K, then V).
struct MatrixSpec {
  const char* name;
  PackedMatrix LayerWeights::*field;
  int n_out, n_in;
  int row0 = 0, tensor_rows = 0;  // 0: the tensor is the matrix (n_out rows)
  int rows() const { return tensor_rows > 0 ? tensor_rows : n_out; }
};

std::vector<MatrixSpec> layer_matrices(const ModelConfig& c) {
  const int d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim();
  std::vector<MatrixSpec> m;
  if (c.fused_qkv) {
    const int all = qd + 2 * kvd;
    m = {{"attn_qkv.weight", &LayerWeights::wq, qd, d, 0, all},
         {"attn_qkv.weight", &LayerWeights::wk, kvd, d, qd, all},
         {"attn_qkv.weight", &LayerWeights::wv, kvd, d, qd + kvd, all}};
  } else {
    m = {{"attn_q.weight", &LayerWeights::wq, qd, d},
         {"attn_k.weight", &LayerWeights::wk, kvd, d},
         {"attn_v.weight", &LayerWeights::wv, kvd, d}};
  }
  m.push_back({"attn_output.weight", &LayerWeights::wo, d, qd});
  if (c.gated_ffn) m.push_back({"ffn_gate.weight", &LayerWeights::w_gate, c.d_ff, d});
  m.push_back({"ffn_up.weight", &LayerWeights::w_up, c.d_ff, d});
  m.push_back({"ffn_down.weight", &LayerWeights::w_down, d, c.d_ff});
  return m;
}

// A vector the file may have (a bias): empty when it does not.
std::vector<float> load_optional(const gguf::GgufFile& f, const std::string& name, int n) {
  return f.find_tensor(name) ? load_vector(f, name, n) : std::vector<float>{};
}

// Q, K and V biases: separate, or one fused attn_qkv.bias cut in three.
void load_qkv_bias(const gguf::GgufFile& f, const ModelConfig& c, const std::string& b,
                   LayerWeights& L) {
  const int qd = c.q_dim(), kvd = c.kv_dim();
  if (!f.find_tensor(b + "attn_qkv.bias")) {
    L.bq = load_vector(f, b + "attn_q.bias", qd);
    L.bk = load_vector(f, b + "attn_k.bias", kvd);
    L.bv = load_vector(f, b + "attn_v.bias", kvd);
    return;
  }
  const std::vector<float> all = load_vector(f, b + "attn_qkv.bias", qd + 2 * kvd);
  L.bq.assign(all.begin(), all.begin() + qd);
  L.bk.assign(all.begin() + qd, all.begin() + qd + kvd);
  L.bv.assign(all.begin() + qd + kvd, all.end());
}

// Where each packed matrix goes: every layer's in the order of
// layer_matrices(), then the head, one after the other in one WeightArena
// (huge pages; a layer's q, k and v are one contiguous stream).
struct WeightPlan {
  kernels::WeightArena arena;
  std::vector<uint8_t*> layer_dst;  // (n_layers * 7)
  uint8_t* head_dst = nullptr;
};

// The packed format of n_out rows of n_in starting at `data` of tensor t:
// forced, float tiles for a float source when asked, or the type's default.
WeightFormat format_of(const gguf::TensorInfo& t, const uint8_t* data, int n_out, int n_in,
                       const LoadOptions& opts, WeightFormat fallback) {
  if (opts.force_format) return *opts.force_format;
  const bool float_src = t.type == DType::F16 || t.type == DType::BF16 || t.type == DType::F32;
  if (opts.float_format && float_src)
    return kernels::float_format_for(t.type, data, size_t(n_out) * size_t(n_in),
                                     *opts.float_format);
  return fallback;
}
WeightFormat matrix_format(const gguf::TensorInfo& t, const MatrixSpec& m,
                           const LoadOptions& opts) {
  return format_of(t, t.data + size_t(m.row0) * t.row_bytes(), m.n_out, m.n_in, opts,
                   kernels::default_format_for(t.type));
}
// The output head prefers int8 over a 4-bit source's own format (head_format).
WeightFormat head_format_of(const gguf::TensorInfo& t, int n_out, int n_in,
                            const LoadOptions& opts) {
  LoadOptions o = opts;
  o.force_format.reset();
  return format_of(t, t.data, n_out, n_in, o, opts.head_format);
}

WeightPlan plan_weights(const gguf::GgufFile& f, const ModelConfig& c,
                        const std::vector<MatrixSpec>& specs, const LoadOptions& opts,
                        const gguf::TensorInfo* head) {
  std::vector<size_t> sizes;
  size_t total = 0;
  auto add = [&](size_t bytes) {
    sizes.push_back(bytes);
    total += (bytes + 63) / 64 * 64;
  };
  for (int l = 0; l < c.n_layers; ++l) {
    for (const MatrixSpec& m : specs) {
      const auto& t = expect(f, "blk." + std::to_string(l) + "." + m.name, {m.n_in, m.rows()});
      add(kernels::packed_size(matrix_format(t, m, opts), m.n_out, m.n_in));
    }
  }
  if (head)
    add(kernels::packed_size(head_format_of(*head, c.n_vocab, c.d_model, opts), c.n_vocab,
                             c.d_model));
  WeightPlan p{kernels::WeightArena(total), {}, nullptr};
  const size_t n_layer_mats = size_t(c.n_layers) * specs.size();
  for (size_t i = 0; i < n_layer_mats; ++i) p.layer_dst.push_back(p.arena.take(sizes[i]));
  if (head) p.head_dst = p.arena.take(sizes.back());
  return p;
}

PackedMatrix load_matrix(const gguf::GgufFile& f, const std::string& name, const MatrixSpec& m,
                         const LoadOptions& opts, uint8_t* dst) {
  const auto& t = expect(f, name, {m.n_in, m.rows()});
  return kernels::pack_matrix(t.type, t.data + size_t(m.row0) * t.row_bytes(), m.n_out, m.n_in,
                              matrix_format(t, m, opts), dst);
}

// An encoder's input side: the embeddings' LayerNorm, token type 0's row
// and the position table (kept in the mapping, read a row per token).
void load_encoder_inputs(const gguf::GgufFile& f, const ModelConfig& c, std::vector<float>& norm_w,
                         std::vector<float>& norm_b, std::vector<float>& type_row,
                         const gguf::TensorInfo*& pos) {
  const int d = c.d_model;
  norm_w = load_vector(f, "token_embd_norm.weight", d);
  norm_b = load_vector(f, "token_embd_norm.bias", d);
  if (const gguf::TensorInfo* t = f.find_tensor("token_types.weight")) {
    if (t->dims.size() != 2 || t->dims[0] != d || t->dims[1] < 1 ||
        !kernels::can_dequantize(t->type))
      throw FormatError(f.path() + ": tensor 'token_types.weight' has shape " + shape_str(t->dims) +
                        ", expected [" + std::to_string(d) + ", types]");
    type_row.resize(size_t(d));
    kernels::dequantize_row(t->type, t->data, type_row.data(), d);
  }
  if (c.position_embd) pos = &expect(f, "position_embd.weight", {d, c.n_ctx_train});
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
  const int d = c.d_model;

  m->embd_ = &expect(f, "token_embd.weight", {d, c.n_vocab});
  // The embedding table is read row by row from the mapping; tell the kernel
  // access will be random so it does not read ahead the whole table.
  f.mapping().advise_random(size_t(m->embd_->data - f.file_bytes().data()), m->embd_->nbytes);

  m->layers_.resize(size_t(c.n_layers));
  const std::vector<MatrixSpec> specs = layer_matrices(c);
  const gguf::TensorInfo* head = !c.generates()      ? nullptr
                                 : c.tied_embeddings ? m->embd_
                                                     : &expect(f, "output.weight", {d, c.n_vocab});
  if (c.encoder)
    load_encoder_inputs(f, c, m->embd_norm_, m->embd_norm_b_, m->type_row_, m->pos_embd_);
  WeightPlan plan = plan_weights(f, c, specs, opts, head);
  m->weights_ = std::move(plan.arena);
  // Layers repack independently: one task per layer on the pool.
  std::atomic<int> done{0};
  std::exception_ptr error;
  std::mutex error_mu;
  pool.run(c.n_layers, [&](int64_t l, int) {
    try {
      LayerWeights& L = m->layers_[size_t(l)];
      const std::string b = "blk." + std::to_string(l) + ".";
      if (c.encoder) {  // post-norm: LayerNorms after the residual adds
        L.attn_out_norm = load_vector(f, b + "attn_output_norm.weight", d);
        L.attn_out_norm_b = load_vector(f, b + "attn_output_norm.bias", d);
        L.layer_out_norm = load_vector(f, b + "layer_output_norm.weight", d);
        L.layer_out_norm_b = load_vector(f, b + "layer_output_norm.bias", d);
      } else {
        L.attn_norm = load_vector(f, b + "attn_norm.weight", d);
        L.ffn_norm = load_vector(f, b + "ffn_norm.weight", d);
      }
      for (size_t i = 0; i < specs.size(); ++i) {
        const MatrixSpec& ms = specs[i];
        L.*ms.field =
            load_matrix(f, b + ms.name, ms, opts, plan.layer_dst[size_t(l) * specs.size() + i]);
      }
      if (c.qkv_bias) load_qkv_bias(f, c, b, L);
      L.bo = load_optional(f, b + "attn_output.bias", d);
      L.b_up = load_optional(f, b + "ffn_up.bias", c.d_ff);
      L.b_down = load_optional(f, b + "ffn_down.bias", d);
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

  if (!c.encoder) m->out_norm_ = load_vector(f, "output_norm.weight", d);
  if (c.dense_out > 0) {
    m->dense_2_ = load_rows(f, "dense_2.weight", d, c.dense_out);
    m->dense_3_ = load_rows(f, "dense_3.weight", c.dense_out, d);
  }
  if (f.find_tensor("rope_freqs.weight")) {
    m->rope_freqs_ = load_vector(f, "rope_freqs.weight", c.rope_dims / 2);
  }
  if (head) {
    m->head_ = kernels::pack_matrix(head->type, head->data, c.n_vocab, d,
                                    head_format_of(*head, c.n_vocab, d, opts), plan.head_dst);
  }
  // A reranker's classification head: a causal model's reads the last row,
  // an encoder's the first (or the mean, as its file says).
  m->rank_head_ = RankHead::from_gguf(f, c.arch, c.causal);
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
