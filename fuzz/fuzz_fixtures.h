#pragma once
// What a fuzz target and the seed writer (make_fuzz_seeds.cpp) must agree on:
// the base model a LoRA adapter is checked against, the KV cache a prefix-
// cache snapshot is loaded into, and the key of an embedding-cache entry.
#include <string>

#include "tern/core/sha256.h"
#include "tern/kv/kv_types.h"
#include "tern/model/config.h"
#include "tern/vision/embedding_cache.h"

namespace tern::fuzz {

// A two-layer llama with grouped-query attention: every LoRA slot has its
// own shape (q 32x32, k/v 16x32, o 32x32, gate/up 64x32, down 32x64).
inline ModelConfig lora_base() {
  ModelConfig c;
  c.arch = "llama";
  c.n_layers = 2;
  c.d_model = 32;
  c.d_ff = 64;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 16;
  return c;
}

// A tiny KV cache (one block of 4 tokens is 2 layers x 1 head x 32 dims):
// room for 8 blocks, so a snapshot can both fill it and overflow it.
inline kv::KvConfig snapshot_kv() {
  kv::KvConfig c;
  c.n_layers = 2;
  c.n_kv_heads = 1;
  c.head_dim = 32;
  c.block_tokens = 4;
  c.max_seqs = 2;
  c.max_seq_tokens = 64;
  c.dram_bytes = 32 * 1024;
  c.staging_bytes = 4096;
  c.model_fingerprint = "fuzz-model";
  return c;
}

// The one key the embedding-cache target looks up.
inline vision::EmbeddingKey embedding_key() {
  vision::EmbeddingKey k;
  k.pixels = sha256("pixels", 6);
  k.projector = sha256("projector", 9);
  k.preprocess = sha256("preprocess", 10);
  return k;
}

}  // namespace tern::fuzz
