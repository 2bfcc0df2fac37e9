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
#include <type_traits>
#include <utility>

#include "tern/core/sha256.h"
#include "tern/kv/kv_types.h"

namespace tern::kv {

static_assert(std::is_same_v<BlockHash, Sha256Digest>);

// A convenience for salts (adapter ids): tern::sha256 of the string.
inline BlockHash hash_string(std::string_view s) {
  return tern::sha256(s);
}

// Reuses one digest context. Not thread-safe: one per owner.
class BlockHasher {
 public:
  BlockHash root(std::string_view model_fingerprint, KvType type, int block_tokens,
                 const BlockHash& salt);
  // extras: (offset inside the block, content hash), offsets in [0, tokens.size()).
  BlockHash chain(const BlockHash& parent, std::span<const int32_t> tokens,
                  std::span<const std::pair<int32_t, BlockHash>> extras);

 private:
  Sha256 sha_;
};

}  // namespace tern::kv
