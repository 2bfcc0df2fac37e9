// SHA-256 chained block hashes (OpenSSL libcrypto).
#include "tern/kv/block_hash.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace tern::kv {
namespace {

constexpr char kRootTag[] = "tern-kv-root-v1";   // sizeof includes the NUL: tags differ in length
constexpr char kBlockTag[] = "tern-kv-block-v1";

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));  // little-endian on every host
}

EVP_MD_CTX* md(void* p) { return static_cast<EVP_MD_CTX*>(p); }

void begin(void* ctx) {
  if (EVP_DigestInit_ex(md(ctx), EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
}
void update(void* ctx, const void* p, size_t n) { EVP_DigestUpdate(md(ctx), p, n); }
void update_u32(void* ctx, uint32_t v) {
  uint8_t b[4];
  put_u32(b, v);
  update(ctx, b, 4);
}
BlockHash finish(void* ctx) {
  BlockHash h{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(md(ctx), h.data(), &len);
  return h;
}

}  // namespace

BlockHash sha256(const void* data, size_t n) {
  BlockHash h{};
  unsigned int len = 0;
  if (EVP_Digest(data, n, h.data(), &len, EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
  return h;
}

BlockHasher::BlockHasher() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_) throw std::bad_alloc();
}
BlockHasher::~BlockHasher() { EVP_MD_CTX_free(md(ctx_)); }

BlockHash BlockHasher::root(std::string_view model_fingerprint, KvType type, int block_tokens,
                            const BlockHash& salt) {
  begin(ctx_);
  update(ctx_, kRootTag, sizeof kRootTag);
  update_u32(ctx_, uint32_t(model_fingerprint.size()));
  update(ctx_, model_fingerprint.data(), model_fingerprint.size());
  update_u32(ctx_, uint32_t(type));
  update_u32(ctx_, uint32_t(block_tokens));
  update(ctx_, salt.data(), salt.size());
  return finish(ctx_);
}

BlockHash BlockHasher::chain(const BlockHash& parent, std::span<const int32_t> tokens,
                             std::span<const std::pair<int32_t, BlockHash>> extras) {
  begin(ctx_);
  update(ctx_, kBlockTag, sizeof kBlockTag);
  update(ctx_, parent.data(), parent.size());
  update_u32(ctx_, uint32_t(tokens.size()));
  uint8_t buf[256 * 4];
  for (size_t i = 0; i < tokens.size(); i += 256) {
    const size_t n = std::min<size_t>(256, tokens.size() - i);
    for (size_t j = 0; j < n; ++j) put_u32(buf + 4 * j, uint32_t(tokens[i + j]));
    update(ctx_, buf, 4 * n);
  }
  update_u32(ctx_, uint32_t(extras.size()));
  for (const auto& [offset, h] : extras) {
    update_u32(ctx_, uint32_t(offset));
    update(ctx_, h.data(), h.size());
  }
  return finish(ctx_);
}

}  // namespace tern::kv
