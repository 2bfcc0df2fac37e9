#pragma once
// Decoded images: PNG, JPEG, BMP and GIF (first frame) from memory, always as
// 8-bit RGB, with a pixel-count limit checked from the header before any
// pixel is decoded (so a small file claiming a huge image is refused cheaply).
//
// pixel_hash() is an image's identity for caches: SHA-256 over its size and
// pixels, so the same picture sent as PNG or BMP hashes the same, while a
// re-encoded (lossy) JPEG does not.
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "tern/core/error.h"
#include "tern/core/sha256.h"

namespace tern::vision {

// A bad image from the user: empty, truncated, not an image, unsupported
// format, zero-sized, or over the pixel limit. The message says which.
class ImageError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // (height, width, 3) row-major, R G B per pixel
};

enum class ImageFormat { Unknown, Png, Jpeg, Bmp, Gif, WebP, Tiff, Other };

// What the first bytes say the data is (magic numbers only; decodes nothing).
ImageFormat sniff_image_format(std::span<const uint8_t> bytes);
std::string_view image_format_name(ImageFormat f);  // "PNG", "JPEG", ...

// Asked with an image's size after its header passed the limits and before
// any pixel is allocated; it may throw to refuse. While decoding, up to
// 2 x width x height x 3 bytes are held (the decoder's buffer and the
// Image's), width x height x 3 once it returns.
using PixelReserve = std::function<void(int width, int height)>;

struct DecodeLimits {
  int64_t max_pixels = 32'000'000;  // width * height, checked from the header
  PixelReserve reserve{};           // empty: not asked
};

// Decodes `bytes` into RGB. Throws ImageError naming what is wrong.
Image decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits = {});

// SHA-256 over width, height, channels (3) as little-endian u32, then the
// pixels. Equal for equal pixels, whatever file format carried them.
Sha256Digest pixel_hash(const Image& img);

}  // namespace tern::vision
