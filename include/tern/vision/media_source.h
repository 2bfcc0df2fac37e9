#pragma once
// Where media comes from, and what a request may reach: `data:` URLs (base64,
// validated strictly; the format is sniffed from the bytes, never trusted from
// the URL's mime type), local files confined to one media directory (plain
// paths and `file://` URLs, checked after resolving `..` and symlinks), and
// `http(s)://` URLs only when the policy allows them and supplies a fetcher
// (the server's, on Boost.Beast: vision/ knows no HTTP).
//
//   load_image_url(url, policy):  url -> bytes (read_media_bytes)
//                                     -> RGB Image (decode_media_image)
//
// Every refusal is a MediaError whose kind() the server maps to a status:
// Forbidden -> 403, everything else -> 400.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tern/core/error.h"
#include "tern/vision/image.h"

namespace tern::vision {

enum class MediaErrorKind {
  Invalid,      // malformed URL, bad base64, corrupt / truncated / non-image data
  Forbidden,    // a path outside the media directory, local or remote media not enabled
  TooLarge,     // over the byte or pixel limit
  Unsupported,  // a format or scheme tern does not read
  Fetch,        // a remote URL could not be fetched (status, timeout, redirects)
};

class MediaError : public InvalidArgument {
 public:
  MediaError(MediaErrorKind kind, const std::string& message)
      : InvalidArgument(message), kind_(kind) {}
  MediaErrorKind kind() const { return kind_; }

 private:
  MediaErrorKind kind_;
};

struct MediaPolicy;

// Fetches a remote URL's body under the policy's limits (bytes, time,
// redirects); throws MediaError (kind Fetch or TooLarge).
using RemoteFetcher =
    std::function<std::vector<uint8_t>(const std::string& url, const MediaPolicy& policy)>;

struct MediaPolicy {
  std::string media_dir;      // "" : local paths and file:// URLs are refused
  bool allow_remote = false;  // http(s):// URLs (also needs `fetch`)
  RemoteFetcher fetch;        // empty: remote URLs are refused
  // Host names and IP addresses a remote fetch may reach although they are
  // not public (loopback, private, link-local, ...): --allow-media-hosts.
  std::vector<std::string> allow_hosts;
  size_t max_bytes = 20u << 20;     // encoded bytes of one image or video
  int64_t max_pixels = 32'000'000;  // width * height of one decoded image / frame
  int remote_timeout_ms = 10'000;   // whole fetch, connect to last byte
  int max_redirects = 3;
};

// What kind of reference a URL is.
enum class MediaScheme { Data, File, Remote };
MediaScheme media_scheme(const std::string& url);  // throws MediaError for other schemes
bool is_remote_url(const std::string& url);        // http:// or https:// (any case)

// The bytes a URL names, under the policy. Throws MediaError.
std::vector<uint8_t> read_media_bytes(const std::string& url, const MediaPolicy& policy);

// A data: URL's payload (base64 only: RFC 4648's alphabet, '=' padding only
// at the end, length a multiple of 4). Throws MediaError.
std::vector<uint8_t> decode_data_url(const std::string& url, size_t max_bytes);

// A local path or file:// URL resolved to a canonical path inside
// policy.media_dir (which must exist). Throws MediaError: Forbidden for
// anything that resolves outside it (`..`, a symlink, another absolute path)
// or when no media directory is configured; Invalid for a missing file or a
// non-regular file.
std::string resolve_media_path(const std::string& path_or_url, const MediaPolicy& policy);

// Decodes image bytes (PNG, JPEG, BMP, GIF through decode_image; WebP through
// libwebp when tern was built with it) under the policy's pixel limit.
// Throws MediaError (kind Invalid, TooLarge or Unsupported).
// `reserve` is asked before the pixels are allocated (image.h's PixelReserve).
Image decode_media_image(std::span<const uint8_t> bytes, const MediaPolicy& policy,
                         const PixelReserve& reserve = {});

// read_media_bytes + decode_media_image.
Image load_image_url(const std::string& url, const MediaPolicy& policy,
                     const PixelReserve& reserve = {});

// Whether this build decodes WebP (libwebp found at configure time).
bool webp_supported();

}  // namespace tern::vision
