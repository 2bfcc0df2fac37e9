#include "tern/vision/media_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "tern/core/confined_path.h"

#ifdef TERN_HAVE_WEBP
#include <webp/decode.h>
#endif

namespace tern::vision {
namespace {

[[noreturn]] void fail(MediaErrorKind kind, const std::string& what) {
  throw MediaError(kind, what);
}

bool has_prefix(const std::string& s, std::string_view p) {
  return s.size() >= p.size() && std::equal(p.begin(), p.end(), s.begin(), [](char a, char b) {
           return std::tolower(uint8_t(a)) == std::tolower(uint8_t(b));
         });
}

std::string size_text(size_t bytes) {
  return std::to_string(bytes) + " bytes";
}

// -1 for a character outside RFC 4648's base64 alphabet.
int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// "%2F" -> "/" (file:// URLs). A stray or bad escape is refused.
std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    auto hex = [&](size_t k) -> int {
      if (k >= s.size()) return -1;
      const char c = char(std::tolower(uint8_t(s[k])));
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int hi = hex(i + 1), lo = hex(i + 2);
    if (hi < 0 || lo < 0) fail(MediaErrorKind::Invalid, "bad percent escape in file URL");
    if (hi == 0 && lo == 0) fail(MediaErrorKind::Invalid, "file URL contains a NUL byte");
    out += char(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// The file's bytes, opened without following a final symlink (the path is
// canonical already: a link swapped in meanwhile is refused, not followed).
std::vector<uint8_t> read_file_bytes(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    fail(MediaErrorKind::Invalid, "cannot open media file: " + std::string(std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    fail(MediaErrorKind::Invalid, "media path is not a regular file");
  if (size_t(st.st_size) > max_bytes)
    fail(MediaErrorKind::TooLarge, "media file is " + size_text(size_t(st.st_size)) +
                                       ", over the limit of " + size_text(max_bytes));
  std::vector<uint8_t> out(size_t(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(MediaErrorKind::Invalid, "media file could not be read completely");
    got += size_t(n);
  }
  return out;
}

#ifdef TERN_HAVE_WEBP
Image decode_webp(std::span<const uint8_t> bytes, int64_t max_pixels, const PixelReserve& reserve) {
  int w = 0, h = 0;
  if (!WebPGetInfo(bytes.data(), bytes.size(), &w, &h) || w <= 0 || h <= 0)
    fail(MediaErrorKind::Invalid, "image: corrupt or truncated WebP header");
  if (int64_t(w) * h > max_pixels)
    fail(MediaErrorKind::TooLarge, "image: WebP is " + std::to_string(w) + "x" + std::to_string(h) +
                                       " = " + std::to_string(int64_t(w) * h) +
                                       " pixels, over the limit of " + std::to_string(max_pixels));
  if (reserve) reserve(w, h);
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.resize(size_t(w) * size_t(h) * 3);
  if (!WebPDecodeRGBInto(bytes.data(), bytes.size(), img.rgb.data(), img.rgb.size(), w * 3))
    fail(MediaErrorKind::Invalid, "image: corrupt or truncated WebP data");
  return img;
}
#endif

}  // namespace

bool webp_supported() {
#ifdef TERN_HAVE_WEBP
  return true;
#else
  return false;
#endif
}

MediaScheme media_scheme(const std::string& url) {
  if (has_prefix(url, "data:")) return MediaScheme::Data;
  if (is_remote_url(url)) return MediaScheme::Remote;
  if (has_prefix(url, "file:")) return MediaScheme::File;
  // A plain path has no scheme: nothing before a ':' that precedes any '/'.
  const size_t colon = url.find(':');
  if (colon != std::string::npos && colon < url.find('/')) {
    fail(MediaErrorKind::Unsupported, "unsupported URL scheme '" + url.substr(0, colon) +
                                          "': use a data: URL, http(s):// or a file path");
  }
  return MediaScheme::File;
}

bool is_remote_url(const std::string& url) {
  return has_prefix(url, "http://") || has_prefix(url, "https://");
}

std::vector<uint8_t> decode_data_url(const std::string& url, size_t max_bytes) {
  const size_t comma = url.find(',');
  if (!has_prefix(url, "data:") || comma == std::string::npos)
    fail(MediaErrorKind::Invalid, "malformed data URL: expected 'data:<type>;base64,<data>'");
  const std::string meta = url.substr(5, comma - 5);
  if (meta.size() < 7 || !has_prefix(meta.substr(meta.size() - 7), ";base64"))
    fail(MediaErrorKind::Unsupported, "data URL is not base64 (expected ';base64,')");
  const std::string_view b64 = std::string_view(url).substr(comma + 1);
  if (b64.empty()) fail(MediaErrorKind::Invalid, "data URL has no data");
  if (b64.size() % 4 != 0)
    fail(MediaErrorKind::Invalid, "invalid base64 in data URL: length " +
                                      std::to_string(b64.size()) + " is not a multiple of 4");
  const size_t pad = b64.ends_with("==") ? 2 : b64.ends_with("=") ? 1 : 0;
  const size_t n_out = b64.size() / 4 * 3 - pad;
  if (n_out > max_bytes)
    fail(MediaErrorKind::TooLarge,
         "data URL holds " + size_text(n_out) + ", over the limit of " + size_text(max_bytes));
  std::vector<uint8_t> out;
  out.reserve(n_out);
  uint32_t acc = 0;
  for (size_t i = 0; i < b64.size() - pad; ++i) {
    const int v = base64_value(b64[i]);
    if (v < 0)
      fail(MediaErrorKind::Invalid, "invalid base64 in data URL: character " + std::to_string(i) +
                                        " is not in the base64 alphabet");
    acc = acc << 6 | uint32_t(v);
    if (i % 4 == 3) {
      out.push_back(uint8_t(acc >> 16));
      out.push_back(uint8_t(acc >> 8));
      out.push_back(uint8_t(acc));
      acc = 0;
    }
  }
  // The last quantum: 2 or 3 characters before the padding, unused bits zero.
  if (pad == 2) {
    if (acc & 0xf) fail(MediaErrorKind::Invalid, "invalid base64 in data URL: non-zero pad bits");
    out.push_back(uint8_t(acc >> 4));
  } else if (pad == 1) {
    if (acc & 0x3) fail(MediaErrorKind::Invalid, "invalid base64 in data URL: non-zero pad bits");
    out.push_back(uint8_t(acc >> 10));
    out.push_back(uint8_t(acc >> 2));
  }
  return out;
}

std::string resolve_media_path(const std::string& path_or_url, const MediaPolicy& policy) {
  if (policy.media_dir.empty())
    fail(MediaErrorKind::Forbidden,
         "local media paths are disabled: start tern serve with --media-dir to allow files "
         "under one directory");
  std::string path = path_or_url;
  if (has_prefix(path, "file:")) {
    std::string rest = path.substr(5);
    if (rest.starts_with("//")) {  // file://host/path: only an empty host or localhost
      rest = rest.substr(2);
      const size_t slash = rest.find('/');
      const std::string host = rest.substr(0, slash);
      if (!host.empty() && host != "localhost")
        fail(MediaErrorKind::Forbidden, "file URLs must name a local path (host '" + host + "')");
      rest = slash == std::string::npos ? "" : rest.substr(slash);
    }
    path = percent_decode(rest);
  }
  try {
    return resolve_confined_path(policy.media_dir, path);
  } catch (const ConfinedPathError& e) {
    const std::string outside = "media path is outside the media directory";
    switch (e.why()) {
      case PathRefusal::Empty:
        fail(MediaErrorKind::Invalid, "empty media path");
      case PathRefusal::Nul:
        fail(MediaErrorKind::Invalid, "media path contains a NUL byte");
      case PathRefusal::NoRoot:
        fail(MediaErrorKind::Forbidden, "the media directory is not available");
      case PathRefusal::Outside:
        fail(MediaErrorKind::Forbidden, outside);
      case PathRefusal::OutsideByLink:
        fail(MediaErrorKind::Forbidden, outside + " (through a symlink)");
      case PathRefusal::NotFound:  // a dangling link or a missing file below the root
        fail(MediaErrorKind::Invalid, "media file not found: " + path);
      case PathRefusal::NotRegular:
        fail(MediaErrorKind::Invalid, "media path is not a regular file: " + path);
    }
    throw;
  }
}

std::vector<uint8_t> read_media_bytes(const std::string& url, const MediaPolicy& policy) {
  if (url.empty()) fail(MediaErrorKind::Invalid, "empty media URL");
  switch (media_scheme(url)) {
    case MediaScheme::Data:
      return decode_data_url(url, policy.max_bytes);
    case MediaScheme::File:
      return read_file_bytes(resolve_media_path(url, policy), policy.max_bytes);
    case MediaScheme::Remote:
      if (!policy.allow_remote)
        fail(MediaErrorKind::Forbidden,
             "remote media URLs are disabled: start tern serve with --allow-remote-media, or "
             "send the image as a data: URL");
      if (!policy.fetch)
        fail(MediaErrorKind::Unsupported, "remote media fetching is not available");
      return policy.fetch(url, policy);
  }
  fail(MediaErrorKind::Invalid, "unreachable");
}

Image decode_media_image(std::span<const uint8_t> bytes, const MediaPolicy& policy,
                         const PixelReserve& reserve) {
  if (bytes.size() > policy.max_bytes)
    fail(MediaErrorKind::TooLarge, "image is " + size_text(bytes.size()) + ", over the limit of " +
                                       size_text(policy.max_bytes));
  if (sniff_image_format(bytes) == ImageFormat::WebP) {
#ifdef TERN_HAVE_WEBP
    return decode_webp(bytes, policy.max_pixels, reserve);
#else
    fail(MediaErrorKind::Unsupported, "image: WebP is not supported by this build (no libwebp)");
#endif
  }
  try {
    return decode_image(bytes, DecodeLimits{.max_pixels = policy.max_pixels, .reserve = reserve});
  } catch (const ImageError& e) {
    const std::string m = e.what();
    const bool too_big = m.find("over the limit") != std::string::npos;
    const bool unsupported = m.find("unsupported format") != std::string::npos;
    fail(too_big       ? MediaErrorKind::TooLarge
         : unsupported ? MediaErrorKind::Unsupported
                       : MediaErrorKind::Invalid,
         m);
  }
}

Image load_image_url(const std::string& url, const MediaPolicy& policy,
                     const PixelReserve& reserve) {
  const std::vector<uint8_t> bytes = read_media_bytes(url, policy);
  return decode_media_image(bytes, policy, reserve);
}

}  // namespace tern::vision
