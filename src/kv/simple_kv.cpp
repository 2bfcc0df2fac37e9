#include "tern/kv/simple_kv.h"

#include <algorithm>
#include <string>

#include "tern/core/error.h"

namespace tern {

SimpleKvCache::SimpleKvCache(int n_layers, int kv_dim, int n_ctx, int max_seqs)
    : n_layers_(n_layers), kv_dim_(kv_dim), n_ctx_(n_ctx), seqs_(size_t(max_seqs)) {}

SeqId SimpleKvCache::alloc() {
  for (size_t i = 0; i < seqs_.size(); ++i) {
    if (!seqs_[i].live) {
      seqs_[i].live = true;
      seqs_[i].length = 0;
      return SeqId(i);
    }
  }
  throw Error("KV cache full: all " + std::to_string(seqs_.size()) + " sequence slots are in use");
}

void SimpleKvCache::free(SeqId seq) {
  Seq& s = get(seq);
  s = Seq{};  // releases the buffers
}

int SimpleKvCache::free_slots() const {
  return int(std::count_if(seqs_.begin(), seqs_.end(), [](const Seq& s) { return !s.live; }));
}

SimpleKvCache::Seq& SimpleKvCache::get(SeqId seq) {
  if (seq < 0 || size_t(seq) >= seqs_.size() || !seqs_[size_t(seq)].live) {
    throw InvalidArgument("unknown KV sequence " + std::to_string(seq));
  }
  return seqs_[size_t(seq)];
}
const SimpleKvCache::Seq& SimpleKvCache::get(SeqId seq) const {
  return const_cast<SimpleKvCache*>(this)->get(seq);
}

int SimpleKvCache::length(SeqId seq) const { return get(seq).length; }

void SimpleKvCache::reserve(SeqId seq, int n_total) {
  Seq& s = get(seq);
  if (n_total > n_ctx_) {
    throw Error("context full: sequence needs " + std::to_string(n_total) +
                " tokens, the context holds " + std::to_string(n_ctx_));
  }
  if (n_total <= s.capacity) return;
  const int cap = std::min(n_ctx_, std::max({n_total, 2 * s.capacity, 64}));
  s.k.resize(size_t(n_layers_));
  s.v.resize(size_t(n_layers_));
  for (int l = 0; l < n_layers_; ++l) {
    s.k[size_t(l)].resize(size_t(cap) * kv_dim_);
    s.v[size_t(l)].resize(size_t(cap) * kv_dim_);
  }
  s.capacity = cap;
}

uint16_t* SimpleKvCache::k_row(SeqId seq, int layer, int pos) {
  return get(seq).k[size_t(layer)].data() + size_t(pos) * kv_dim_;
}
uint16_t* SimpleKvCache::v_row(SeqId seq, int layer, int pos) {
  return get(seq).v[size_t(layer)].data() + size_t(pos) * kv_dim_;
}

KvView SimpleKvCache::view(SeqId seq, int layer) const {
  const Seq& s = get(seq);
  if (s.capacity == 0) return {};
  return {s.k[size_t(layer)].data(), s.v[size_t(layer)].data(), kv_dim_};
}

void SimpleKvCache::commit(SeqId seq, int n_total) {
  Seq& s = get(seq);
  s.length = n_total;
}

}  // namespace tern
