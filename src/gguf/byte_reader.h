#pragma once
// A bounds-checked little-endian cursor over the bytes of a GGUF file.
// Every read checks the remaining length first; failures throw FormatError
// "<file>: <what> (at byte N)". Private to the gguf module.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "tern/core/error.h"

namespace tern::gguf {

// `s` quoted for an error message: at most 64 bytes, non-printable bytes as \xNN.
std::string quoted(std::string_view s);

class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> bytes, const std::string& name)
      : bytes_(bytes), name_(name) {}

  size_t pos() const { return pos_; }
  size_t size() const { return bytes_.size(); }
  size_t remaining() const { return bytes_.size() - pos_; }

  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    throw FormatError(name_ + ": " + what + " (at byte " + std::to_string(at) + ")");
  }

  // Throws "truncated: ..." unless n more bytes are available.
  void need(uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      fail("truncated: " + std::string(what) + " needs " + std::to_string(n) + " bytes but only " +
           std::to_string(remaining()) + " remain");
    }
  }

  template <typename T>
  T read(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::span<const uint8_t> take(uint64_t n, std::string_view what) {
    need(n, what);
    auto s = bytes_.subspan(pos_, size_t(n));
    pos_ += size_t(n);
    return s;
  }

  // A GGUF string: len:u64 followed by len bytes (not NUL-terminated).
  std::string_view read_string(std::string_view what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > remaining()) {
      fail_at(pos_ - 8, "truncated: " + std::string(what) + " has length " + std::to_string(len) +
                            " but only " + std::to_string(remaining()) + " bytes remain");
    }
    auto s = take(len, what);
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& name_;
  size_t pos_ = 0;
};

}  // namespace tern::gguf
