#include "tern/core/random_id.h"

#include <unistd.h>  // getentropy (glibc 2.25+, macOS)
#if defined(__APPLE__)
#include <sys/random.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tern/core/error.h"

namespace tern {

std::string random_hex(size_t bytes) {
  std::vector<uint8_t> raw(bytes);
  // The kernel's CSPRNG, at most 256 bytes a call (getentropy's limit; it
  // never returns short).
  for (size_t got = 0; got < bytes;) {
    const size_t n = std::min<size_t>(256, bytes - got);
    if (::getentropy(raw.data() + got, n) != 0)
      throw IoError(std::string("getentropy failed: ") + std::strerror(errno));
    got += n;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(bytes * 2, '0');
  for (size_t i = 0; i < bytes; ++i) {
    out[2 * i] = kHex[raw[i] >> 4];
    out[2 * i + 1] = kHex[raw[i] & 15];
  }
  return out;
}

}  // namespace tern
