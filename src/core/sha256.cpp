// SHA-256 through OpenSSL's EVP interface.
#include "tern/core/sha256.h"

#include <openssl/evp.h>

#include <new>
#include <utility>

namespace tern {
namespace {

EVP_MD_CTX* md(void* p) {
  return static_cast<EVP_MD_CTX*>(p);
}

}  // namespace

Sha256Digest sha256(const void* data, size_t n) {
  Sha256Digest h{};
  unsigned int len = 0;
  if (EVP_Digest(data, n, h.data(), &len, EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
  return h;
}

std::string to_hex(const Sha256Digest& d) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * d.size(), '0');
  for (size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = kDigits[d[i] >> 4];
    s[2 * i + 1] = kDigits[d[i] & 15];
  }
  return s;
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_) throw std::bad_alloc();
  reset();
}
Sha256::~Sha256() {
  EVP_MD_CTX_free(md(ctx_));
}
Sha256::Sha256(Sha256&& o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)) {}
Sha256& Sha256::operator=(Sha256&& o) noexcept {
  std::swap(ctx_, o.ctx_);
  return *this;
}

void Sha256::reset() {
  if (EVP_DigestInit_ex(md(ctx_), EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
}

Sha256& Sha256::update(const void* data, size_t n) {
  EVP_DigestUpdate(md(ctx_), data, n);
  return *this;
}

Sha256& Sha256::update_u32(uint32_t v) {
  uint8_t b[4];
  for (int i = 0; i < 4; ++i) b[i] = uint8_t(v >> (8 * i));
  return update(b, 4);
}

Sha256Digest Sha256::finish() {
  Sha256Digest h{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(md(ctx_), h.data(), &len);
  reset();
  return h;
}

}  // namespace tern
