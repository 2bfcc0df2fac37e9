// Chained block hashes on core's SHA-256.
#include "tern/kv/block_hash.h"

#include <algorithm>

namespace tern::kv {
namespace {

constexpr char kRootTag[] = "tern-kv-root-v1";  // sizeof includes the NUL: tags differ in length
constexpr char kBlockTag[] = "tern-kv-block-v1";

}  // namespace

BlockHash BlockHasher::root(std::string_view model_fingerprint, KvType type, int block_tokens,
                            const BlockHash& salt) {
  sha_.update(kRootTag, sizeof kRootTag);
  sha_.update_u32(uint32_t(model_fingerprint.size()));
  sha_.update(model_fingerprint);
  sha_.update_u32(uint32_t(type));
  sha_.update_u32(uint32_t(block_tokens));
  sha_.update(salt.data(), salt.size());
  return sha_.finish();
}

BlockHash BlockHasher::chain(const BlockHash& parent, std::span<const int32_t> tokens,
                             std::span<const std::pair<int32_t, BlockHash>> extras) {
  sha_.update(kBlockTag, sizeof kBlockTag);
  sha_.update(parent.data(), parent.size());
  sha_.update_u32(uint32_t(tokens.size()));
  uint8_t buf[256 * 4];  // token ids as little-endian u32, 256 at a time
  for (size_t i = 0; i < tokens.size(); i += 256) {
    const size_t n = std::min<size_t>(256, tokens.size() - i);
    for (size_t j = 0; j < n; ++j) {
      for (int b = 0; b < 4; ++b) buf[4 * j + b] = uint8_t(uint32_t(tokens[i + j]) >> (8 * b));
    }
    sha_.update(buf, 4 * n);
  }
  sha_.update_u32(uint32_t(extras.size()));
  for (const auto& [offset, h] : extras) {
    sha_.update_u32(uint32_t(offset));
    sha_.update(h.data(), h.size());
  }
  return sha_.finish();
}

}  // namespace tern::kv
