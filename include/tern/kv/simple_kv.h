#pragma once
// A simple per-sequence fp16 KV cache: each live sequence owns, per layer, a
// contiguous (capacity, kv_dim) buffer for K and one for V that grows by
// doubling up to n_ctx. The paged, quantized cache replaces it behind KvCache.
#include <vector>

#include "tern/kv/kv_cache.h"

namespace tern {

class SimpleKvCache final : public KvCache {
 public:
  SimpleKvCache(int n_layers, int kv_dim, int n_ctx, int max_seqs);

  SeqId alloc() override;
  void free(SeqId seq) override;
  int length(SeqId seq) const override;
  int capacity_tokens() const override { return n_ctx_; }
  int free_slots() const override;

  void reserve(SeqId seq, int n_total) override;
  uint16_t* k_row(SeqId seq, int layer, int pos) override;
  uint16_t* v_row(SeqId seq, int layer, int pos) override;
  KvView view(SeqId seq, int layer) const override;
  void commit(SeqId seq, int n_total) override;

 private:
  struct Seq {
    bool live = false;
    int length = 0;
    int capacity = 0;
    std::vector<std::vector<uint16_t>> k, v;  // per layer: (capacity, kv_dim)
  };
  Seq& get(SeqId seq);
  const Seq& get(SeqId seq) const;

  int n_layers_, kv_dim_, n_ctx_;
  std::vector<Seq> seqs_;
};

}  // namespace tern
