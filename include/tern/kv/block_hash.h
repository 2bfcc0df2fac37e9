#pragma once
// Chained block hashes for the prefix cache.
//
// A full block is named by SHA-256 over an unambiguous (length-prefixed,
// domain-tagged) encoding of: its parent block's hash, its token ids, and the
// extra keys that fall inside it (content hashes of media at their offsets).
// The first block's parent is the sequence's root, which covers what decides
// KV besides tokens: the model fingerprint, the KV type and block size, and a
// per-sequence salt (e.g. the adapter id). Two blocks share a hash only if
// their whole prefixes and contexts match, or SHA-256 collides.
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include "tern/kv/kv_types.h"

namespace tern::kv {

// SHA-256 of bytes; hash_string is a convenience for salts (adapter ids).
BlockHash sha256(const void* data, size_t n);
inline BlockHash hash_string(std::string_view s) { return sha256(s.data(), s.size()); }

// Reuses one OpenSSL digest context. Not thread-safe: one per owner.
class BlockHasher {
 public:
  BlockHasher();
  ~BlockHasher();
  BlockHasher(const BlockHasher&) = delete;
  BlockHasher& operator=(const BlockHasher&) = delete;

  BlockHash root(std::string_view model_fingerprint, KvType type, int block_tokens,
                 const BlockHash& salt);
  // extras: (offset inside the block, content hash), offsets in [0, tokens.size()).
  BlockHash chain(const BlockHash& parent, std::span<const int32_t> tokens,
                  std::span<const std::pair<int32_t, BlockHash>> extras);

 private:
  void* ctx_;  // EVP_MD_CTX
};

}  // namespace tern::kv
