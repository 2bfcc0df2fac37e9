#include "tern/vision/image.h"

#include <climits>
#include <cstring>
#include <memory>
#include <string>

#define STBI_NO_STDIO
#include <stb_image.h>

namespace tern::vision {
namespace {

bool starts_with(std::span<const uint8_t> b, const char* magic, size_t n, size_t at = 0) {
  return b.size() >= at + n && std::memcmp(b.data() + at, magic, n) == 0;
}

std::string reason() {
  const char* r = stbi_failure_reason();
  return r ? r : "unknown error";
}

[[noreturn]] void fail(const std::string& what) {
  throw ImageError("image: " + what);
}

uint32_t be16(const uint8_t* p) {
  return uint32_t(p[0]) << 8 | p[1];
}
uint32_t be32(const uint8_t* p) {
  return be16(p) << 16 | be16(p + 2);
}
uint32_t le16(const uint8_t* p) {
  return uint32_t(p[1]) << 8 | p[0];
}
int64_t le32s(const uint8_t* p) {
  return int32_t(le16(p + 2) << 16 | le16(p));
}

struct Size {
  int64_t w = -1, h = -1;  // -1: the header did not say (stb decides)
};

// The size a header claims, read directly so that a huge or zero size gets a
// precise message (stb reports both as a generic failure).
Size header_size(ImageFormat fmt, std::span<const uint8_t> b) {
  const uint8_t* p = b.data();
  switch (fmt) {
    case ImageFormat::Png:  // IHDR: width, height big-endian u32 at 16
      if (b.size() >= 24) return {be32(p + 16), be32(p + 20)};
      break;
    case ImageFormat::Gif:  // logical screen: width, height little-endian u16 at 6
      if (b.size() >= 10) return {le16(p + 6), le16(p + 8)};
      break;
    case ImageFormat::Bmp:  // BITMAPINFOHEADER: i32 width, height (negative: top-down)
      if (b.size() >= 26 && le32s(p + 14) >= 40) {
        const int64_t h = le32s(p + 22);
        return {le32s(p + 18), h < 0 ? -h : h};
      }
      break;
    case ImageFormat::Jpeg:  // the first SOFn segment: height, width big-endian u16
      for (size_t i = 2; i + 9 <= b.size();) {
        if (p[i] != 0xff) break;
        const uint8_t m = p[i + 1];
        if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc)
          return {be16(p + i + 7), be16(p + i + 5)};
        if (m == 0xda || m == 0xd9) break;
        i += 2 + be16(p + i + 2);
      }
      break;
    default:
      break;
  }
  return {};
}

// stb_image 2.27 (Debian's) trusts a JPEG Huffman table's symbol count and
// writes up to 4080 symbols into a 256-entry table; and it decodes a scan
// with whatever table its components select, defined or not: a table no DHT
// segment defined is uninitialised heap memory, whose garbage symbol ids
// index far outside the 256-entry table (found by fuzz_image). Walk every
// marker segment (including those between progressive scans) and refuse
// both first.
bool jpeg_huffman_tables_ok(std::span<const uint8_t> b) {
  const uint8_t* p = b.data();
  const size_t n = b.size();
  auto at = [&](size_t k) -> uint32_t { return k < n ? p[k] : 0; };  // stb reads 0 past the end
  bool defined[2][4] = {};   // [class: 0 DC, 1 AC][table id] set by a DHT segment so far
  bool progressive = false;  // SOF2: a scan may use only its DC or only its AC tables
  size_t i = 2;
  while (i + 4 <= n) {
    if (p[i] != 0xff) {
      ++i;
      continue;
    }  // stb scans ahead for the next marker too
    const uint8_t m = p[i + 1];
    if (m == 0xff) {
      ++i;
      continue;
    }  // fill byte
    if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) {
      i += 2;
      continue;
    }
    if (m == 0xd9) return true;
    const size_t end = i + 2 + be16(p + i + 2);
    if (m == 0xc4) {
      for (size_t j = i + 4; j < end;) {
        uint32_t count = 0;
        for (size_t k = 1; k <= 16; ++k) count += at(j + k);
        if (count > 256) return false;
        const uint32_t cls = at(j) >> 4, id = at(j) & 15;
        if (cls <= 1 && id <= 3) defined[cls][id] = true;  // stb refuses other ids itself
        j += 17 + count;
      }
    }
    if (m == 0xc2) progressive = true;
    if (m == 0xda) {  // a scan: every table it decodes with must exist by now
      const uint32_t ns = at(i + 4);
      const uint32_t ss = at(i + 5 + 2 * ns), se = at(i + 6 + 2 * ns);
      for (uint32_t c = 0; c < ns; ++c) {
        const uint32_t dc = at(i + 6 + 2 * c) >> 4, ac = at(i + 6 + 2 * c) & 15;
        const bool uses_dc = !progressive || ss == 0, uses_ac = !progressive || se > 0;
        if (uses_dc && dc <= 3 && !defined[0][dc]) return false;
        if (uses_ac && ac <= 3 && !defined[1][ac]) return false;
      }
    }
    i = end;
    if (m == 0xda) {  // skip the entropy-coded data up to the next real marker
      while (i + 1 < n &&
             !(p[i] == 0xff && p[i + 1] != 0 && !(p[i + 1] >= 0xd0 && p[i + 1] <= 0xd7)))
        ++i;
    }
  }
  return true;
}

// stb_image grows its IDAT buffer to a chunk's declared length before it
// reads the chunk, so a 100-byte PNG claiming a 2 GiB chunk allocates 2 GiB
// (found by fuzz_image). Every chunk must fit in the data that is there.
bool png_chunks_fit(std::span<const uint8_t> b) {
  for (size_t i = 8; i + 8 <= b.size();) {
    const uint64_t len = be32(b.data() + i);
    if (len + 12 > b.size() - i) return false;  // length, type, data, CRC
    if (std::memcmp(b.data() + i + 4, "IEND", 4) == 0) return true;
    i += size_t(len) + 12;
  }
  return true;  // trailing bytes short of a chunk header: stb reports the truncation
}

struct StbFree {
  void operator()(stbi_uc* p) const { stbi_image_free(p); }
};

}  // namespace

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  if (starts_with(b, "\x89PNG\r\n\x1a\n", 8)) return ImageFormat::Png;
  if (starts_with(b, "\xff\xd8\xff", 3)) return ImageFormat::Jpeg;
  if (starts_with(b, "BM", 2)) return ImageFormat::Bmp;
  if (starts_with(b, "GIF87a", 6) || starts_with(b, "GIF89a", 6)) return ImageFormat::Gif;
  if (starts_with(b, "RIFF", 4) && starts_with(b, "WEBP", 4, 8)) return ImageFormat::WebP;
  if (starts_with(b, "II*\0", 4) || starts_with(b, "MM\0*", 4)) return ImageFormat::Tiff;
  // Formats stb could read but tern does not accept, and other common ones.
  if (starts_with(b, "8BPS", 4) ||
      starts_with(b,
                  "\0\0\0\x0c"
                  "jP",
                  6) ||
      starts_with(b, "ftypavif", 8, 4) || starts_with(b, "ftypheic", 8, 4) ||
      starts_with(b, "#?RADIANCE", 10) || starts_with(b, "P6\n", 3) || starts_with(b, "P5\n", 3))
    return ImageFormat::Other;
  return ImageFormat::Unknown;
}

std::string_view image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::Png:
      return "PNG";
    case ImageFormat::Jpeg:
      return "JPEG";
    case ImageFormat::Bmp:
      return "BMP";
    case ImageFormat::Gif:
      return "GIF";
    case ImageFormat::WebP:
      return "WebP";
    case ImageFormat::Tiff:
      return "TIFF";
    case ImageFormat::Other:
      return "other";
    case ImageFormat::Unknown:
      break;
  }
  return "unknown";
}

Image decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  if (bytes.empty()) fail("empty data (0 bytes)");
  if (bytes.size() > size_t(INT_MAX))
    fail("data too large (" + std::to_string(bytes.size()) + " bytes)");
  const ImageFormat fmt = sniff_image_format(bytes);
  const std::string supported = "supported formats are PNG, JPEG, BMP and GIF";
  if (fmt == ImageFormat::Unknown) fail("not an image: unrecognized header (" + supported + ")");
  if (fmt == ImageFormat::WebP || fmt == ImageFormat::Tiff || fmt == ImageFormat::Other)
    fail("unsupported format " + std::string(image_format_name(fmt)) + " (" + supported + ")");
  const std::string name(image_format_name(fmt));
  const int len = int(bytes.size());

  // Header first: refuse a bomb before any pixel memory is allocated.
  auto check_size = [&](int64_t w, int64_t h) {
    if (w == 0 || h == 0) fail(name + " has zero width or height");
    // Header sizes reach 2^32 - 1 a side (PNG): compare by division, as w * h
    // can overflow int64 (the product is only formed for the message).
    if (w > limits.max_pixels / h)
      fail(name + " is " + std::to_string(w) + "x" + std::to_string(h) + " = " +
           std::to_string(uint64_t(w) * uint64_t(h)) + " pixels, over the limit of " +
           std::to_string(limits.max_pixels));
  };
  if (const Size s = header_size(fmt, bytes); s.w >= 0 && s.h >= 0) check_size(s.w, s.h);
  if (fmt == ImageFormat::Jpeg && !jpeg_huffman_tables_ok(bytes))
    fail(
        "corrupt JPEG data (a Huffman table has more than 256 symbols, or a scan uses one "
        "that is not defined)");
  if (fmt == ImageFormat::Png && !png_chunks_fit(bytes))
    fail("corrupt or truncated PNG data (a chunk runs past the end of the data)");
  int w = 0, h = 0, comp = 0;
  if (!stbi_info_from_memory(bytes.data(), len, &w, &h, &comp))
    fail("corrupt or truncated " + name + " header (" + reason() + ")");
  check_size(w, h);
  if (limits.reserve) limits.reserve(w, h);

  int dw = 0, dh = 0, dc = 0;
  std::unique_ptr<stbi_uc, StbFree> px(stbi_load_from_memory(bytes.data(), len, &dw, &dh, &dc, 3));
  if (!px) fail("corrupt or truncated " + name + " data (" + reason() + ")");
  if (dw != w || dh != h || int64_t(dw) * dh > limits.max_pixels)
    fail(name + " decoded to an invalid size " + std::to_string(dw) + "x" + std::to_string(dh));
  Image img;
  img.width = dw;
  img.height = dh;
  img.rgb.assign(px.get(), px.get() + size_t(dw) * size_t(dh) * 3);
  return img;
}

}  // namespace tern::vision
