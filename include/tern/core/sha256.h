#pragma once
// SHA-256 (OpenSSL libcrypto underneath; nothing of it leaks into this header).
//
// One-shot: sha256(data, n). Incremental, for data that arrives in pieces
// (image rows, length-prefixed records): Sha256 h; h.update(a).update(b);
// h.finish(). Both give the same digest for the same bytes, however they are
// split. Used for prefix-cache block hashes (kv/) and media content hashes.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tern {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest sha256(const void* data, size_t n);
inline Sha256Digest sha256(std::string_view s) {
  return sha256(s.data(), s.size());
}

// Lower-case hex, 64 characters.
std::string to_hex(const Sha256Digest& d);

// Incremental hashing. Reuses one digest context: finish() returns the digest
// and starts a new message, so one object can hash many. Move-only; not
// thread-safe (one per owner).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&& o) noexcept;
  Sha256& operator=(Sha256&& o) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  Sha256& update(const void* data, size_t n);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // Appends v as 4 little-endian bytes (the same on every host).
  Sha256& update_u32(uint32_t v);
  // The digest of everything since construction or the last finish()/reset().
  Sha256Digest finish();
  // Drops what was hashed so far.
  void reset();

 private:
  void* ctx_ = nullptr;  // EVP_MD_CTX
};

}  // namespace tern
