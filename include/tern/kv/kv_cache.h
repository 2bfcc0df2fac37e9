#pragma once
// The KV cache seen by the forward pass. A sequence's keys and values are
// stored per layer as fp16 rows of kv_dim = n_kv_heads * head_dim values.
// The forward pass (1) reserve()s room for the batch's new tokens, (2) writes
// K/V rows for them, (3) reads views for attention, (4) commit()s the new length.
#include <cstdint>

#include "tern/core/types.h"

namespace tern {

// Attention reads K and V rows for positions [0, n) of one layer:
// row t of head h starts at k + t*stride + h*head_dim.
struct KvView {
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  int64_t stride = 0;  // elements between consecutive positions
};

class KvCache {
 public:
  virtual ~KvCache() = default;

  virtual SeqId alloc() = 0;                // throws tern::Error when full
  virtual void free(SeqId seq) = 0;
  virtual int length(SeqId seq) const = 0;  // committed tokens
  virtual int capacity_tokens() const = 0;  // max tokens per sequence
  virtual int free_slots() const = 0;

  // Make room for positions [0, n_total); throws tern::Error past capacity.
  virtual void reserve(SeqId seq, int n_total) = 0;
  virtual uint16_t* k_row(SeqId seq, int layer, int pos) = 0;  // (kv_dim)
  virtual uint16_t* v_row(SeqId seq, int layer, int pos) = 0;  // (kv_dim)
  virtual KvView view(SeqId seq, int layer) const = 0;
  virtual void commit(SeqId seq, int n_total) = 0;
};

}  // namespace tern
