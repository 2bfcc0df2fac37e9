#include "tern/vision/image.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tern/vision/pixel_hash.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb_image_write.h>
#pragma GCC diagnostic pop

namespace tern::vision {
namespace {

using Bytes = std::vector<uint8_t>;

void append(void* ctx, void* data, int n) {
  auto* out = static_cast<Bytes*>(ctx);
  auto* p = static_cast<uint8_t*>(data);
  out->insert(out->end(), p, p + n);
}

// A w x h RGB test pattern: smooth gradients plus a little seeded noise.
Image pattern(int w, int h, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  Image img{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &img.rgb[(size_t(y) * w + x) * 3];
      p[0] = uint8_t(x * 255 / std::max(1, w - 1));
      p[1] = uint8_t(y * 255 / std::max(1, h - 1));
      p[2] = uint8_t(rng() & 0xff);
    }
  return img;
}

Bytes encode(const Image& img, const std::string& fmt) {
  Bytes out;
  int ok = 0;
  if (fmt == "png")
    ok = stbi_write_png_to_func(append, &out, img.width, img.height, 3, img.rgb.data(),
                                img.width * 3);
  else if (fmt == "bmp")
    ok = stbi_write_bmp_to_func(append, &out, img.width, img.height, 3, img.rgb.data());
  else if (fmt == "jpg")
    ok = stbi_write_jpg_to_func(append, &out, img.width, img.height, 3, img.rgb.data(), 90);
  EXPECT_TRUE(ok) << fmt;
  return out;
}

// Runs `f` and returns the ImageError message ("" if nothing was thrown).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ImageError& e) {
    return e.what();
  }
  return "";
}

// 1x1 GIF89a, global palette {red, black}, one frame with pixel index 0.
const Bytes kRedGif = {'G',  'I', 'F',  '8',  '9', 'a', 1, 0, 1, 0, 0x80, 0, 0,  // screen
                       0xff, 0,   0,    0,    0,   0,                            // palette
                       ',',  0,   0,    0,    0,   1,   0, 1, 0, 0,              // frame
                       2,    2,   0x44, 0x01, 0,   ';'};                         // LZW data

TEST(Image, DecodesPngAndBmpLosslessly) {
  for (const char* fmt : {"png", "bmp"}) {
    const Image src = pattern(37, 21);
    const Image got = decode_image(encode(src, fmt));
    EXPECT_EQ(got.width, 37) << fmt;
    EXPECT_EQ(got.height, 21) << fmt;
    EXPECT_EQ(got.rgb, src.rgb) << fmt;
  }
}

TEST(Image, DecodesJpegApproximately) {
  Image src = pattern(32, 16);
  for (size_t i = 2; i < src.rgb.size(); i += 3) src.rgb[i] = 128;  // no noise: JPEG-friendly
  const Image got = decode_image(encode(src, "jpg"));
  ASSERT_EQ(got.width, 32);
  ASSERT_EQ(got.height, 16);
  double err = 0;
  for (size_t i = 0; i < src.rgb.size(); ++i) err += std::abs(int(src.rgb[i]) - int(got.rgb[i]));
  EXPECT_LT(err / double(src.rgb.size()), 8.0);
}

TEST(Image, DecodesGifFirstFrame) {
  const Image got = decode_image(kRedGif);
  EXPECT_EQ(got.width, 1);
  EXPECT_EQ(got.height, 1);
  EXPECT_EQ(got.rgb, (std::vector<uint8_t>{255, 0, 0}));
}

TEST(Image, SniffsFormats) {
  EXPECT_EQ(sniff_image_format(encode(pattern(2, 2), "png")), ImageFormat::Png);
  EXPECT_EQ(sniff_image_format(encode(pattern(2, 2), "bmp")), ImageFormat::Bmp);
  EXPECT_EQ(sniff_image_format(encode(pattern(8, 8), "jpg")), ImageFormat::Jpeg);
  EXPECT_EQ(sniff_image_format(kRedGif), ImageFormat::Gif);
  EXPECT_EQ(sniff_image_format(Bytes{1, 2, 3}), ImageFormat::Unknown);
}

TEST(Image, PixelHashIgnoresContainerButNotPixels) {
  const Image src = pattern(19, 11);
  const auto png = pixel_hash(decode_image(encode(src, "png")));
  const auto bmp = pixel_hash(decode_image(encode(src, "bmp")));
  EXPECT_EQ(png, bmp);
  EXPECT_EQ(png, pixel_hash(src));
  Image other = src;
  other.rgb[5] ^= 1;
  EXPECT_NE(pixel_hash(other), png);
  // Same bytes, different shape: the size is part of the identity.
  Image reshaped{11, 19, src.rgb};
  EXPECT_NE(pixel_hash(reshaped), png);
  // A lossy re-encode is a different picture.
  EXPECT_NE(pixel_hash(decode_image(encode(src, "jpg"))), png);
}

TEST(Image, RefusesEmptyInput) {
  EXPECT_NE(error_of([] { decode_image(Bytes{}); }).find("empty data"), std::string::npos);
}

TEST(Image, RefusesRandomBytes) {
  std::mt19937 rng(7);
  Bytes junk(300);
  for (auto& b : junk) b = uint8_t(rng());
  junk[0] = 0x13;  // not a magic byte of any format
  const std::string e = error_of([&] { decode_image(junk); });
  EXPECT_NE(e.find("not an image"), std::string::npos) << e;
  EXPECT_NE(e.find("PNG, JPEG, BMP and GIF"), std::string::npos) << e;
}

TEST(Image, RefusesUnsupportedFormat) {
  Bytes webp = {'R', 'I', 'F', 'F', 40, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', ' '};
  webp.resize(48, 0);
  const std::string e = error_of([&] { decode_image(webp); });
  EXPECT_NE(e.find("unsupported format WebP"), std::string::npos) << e;
}

TEST(Image, RefusesTruncatedPng) {
  Bytes png = encode(pattern(40, 40), "png");
  png.resize(png.size() / 2);
  const std::string e = error_of([&] { decode_image(png); });
  EXPECT_NE(e.find("corrupt or truncated PNG"), std::string::npos) << e;
  Bytes header_only(png.begin(), png.begin() + 12);  // magic and part of IHDR
  const std::string e2 = error_of([&] { decode_image(header_only); });
  EXPECT_NE(e2.find("corrupt or truncated PNG header"), std::string::npos) << e2;
}

// stb_image 2.27 would overflow its Huffman table on a DHT segment claiming
// more than 256 symbols; the decoder refuses it before stb sees it.
TEST(Image, RefusesOversizedJpegHuffmanTable) {
  Image src = pattern(16, 16);
  Bytes jpg = encode(src, "jpg");
  size_t dht = 0;
  for (size_t i = 2; i + 1 < jpg.size() && !dht; ++i)
    if (jpg[i] == 0xff && jpg[i + 1] == 0xc4) dht = i;
  ASSERT_GT(dht, 0u);
  for (size_t k = 0; k < 16; ++k) jpg[dht + 5 + k] = 0xff;  // counts of the first table
  const std::string e = error_of([&] { decode_image(jpg); });
  EXPECT_NE(e.find("Huffman table has more than 256 symbols"), std::string::npos) << e;
}

// stb_image 2.27 decodes a scan with the Huffman tables its components
// select whether or not a DHT segment defined them; an undefined one is
// uninitialised heap memory and its symbol ids index outside the table
// (fuzz_image found it: fuzz/crashes/image/undefined-huffman-table). The
// decoder refuses such a scan before stb sees it; valid JPEGs still decode.
TEST(Image, RefusesAScanUsingAnUndefinedHuffmanTable) {
  Image src = pattern(16, 16);
  Bytes jpg = encode(src, "jpg");
  ASSERT_NO_THROW(decode_image(jpg));
  size_t sos = 0;
  for (size_t i = 2; i + 1 < jpg.size() && !sos; ++i)
    if (jpg[i] == 0xff && jpg[i + 1] == 0xda) sos = i;
  ASSERT_GT(sos, 0u);
  jpg[sos + 6] = 0x33;  // the first component's DC and AC tables: id 3, never defined
  const std::string e = error_of([&] { decode_image(jpg); });
  EXPECT_NE(e.find("a scan uses one that is not defined"), std::string::npos) << e;
}

// stb_image grows its PNG data buffer to a chunk's declared length before
// reading it: a tiny PNG claiming a 2 GiB IDAT made it allocate 2 GiB (found
// by fuzz_image, fuzz/crashes/image/idat-length-2gib). Refused first.
TEST(Image, RefusesAPngChunkLongerThanTheData) {
  Bytes png = encode(pattern(8, 8), "png");
  ASSERT_NO_THROW(decode_image(png));
  size_t idat = 0;
  for (size_t i = 8; i + 8 <= png.size() && !idat; ++i)
    if (std::memcmp(png.data() + i + 4, "IDAT", 4) == 0) idat = i;
  ASSERT_GT(idat, 0u);
  png[idat] = 0x7f;  // the length's high byte: about 2 GiB
  const std::string e = error_of([&] { decode_image(png); });
  EXPECT_NE(e.find("a chunk runs past the end of the data"), std::string::npos) << e;
}

// Rewrites the IHDR width/height of a PNG (big-endian at bytes 16..23). The
// CRC is left stale: stb does not check it, and the size check comes first.
Bytes with_png_size(Bytes png, uint32_t w, uint32_t h) {
  for (int i = 0; i < 4; ++i) {
    png[16 + i] = uint8_t(w >> (24 - 8 * i));
    png[20 + i] = uint8_t(h >> (24 - 8 * i));
  }
  return png;
}

TEST(Image, RefusesHugeHeaderBeforeDecoding) {
  const Bytes bomb = with_png_size(encode(pattern(4, 4), "png"), 100000, 100000);
  const std::string e = error_of([&] { decode_image(bomb); });
  EXPECT_NE(e.find("100000x100000 = 10000000000 pixels, over the limit of 32000000"),
            std::string::npos)
      << e;
  Bytes gif = kRedGif;  // logical screen 60000x60000
  gif[6] = gif[8] = 0x60;
  gif[7] = gif[9] = 0xea;
  const std::string eg = error_of([&] { decode_image(gif); });
  EXPECT_NE(eg.find("GIF is 60000x60000"), std::string::npos) << eg;
  // A configurable limit: a real 64x64 image is refused under a 1000-pixel cap.
  const std::string e2 =
      error_of([&] { decode_image(encode(pattern(64, 64), "png"), DecodeLimits{1000}); });
  EXPECT_NE(e2.find("64x64 = 4096 pixels, over the limit of 1000"), std::string::npos) << e2;
}

TEST(Image, RefusesZeroSize) {
  const std::string e =
      error_of([&] { decode_image(with_png_size(encode(pattern(4, 4), "png"), 0, 4)); });
  EXPECT_NE(e.find("zero width or height"), std::string::npos) << e;
}

// Mutated PNG, BMP, JPEG and GIF bytes either decode or throw ImageError:
// never crash, never another exception type. Run it under the asan preset;
// TERN_IMAGE_FUZZ_ITERS and TERN_IMAGE_FUZZ_SEED run it longer or elsewhere.
TEST(Image, MutatedInputsNeverCrash) {
  const char* it_env = std::getenv("TERN_IMAGE_FUZZ_ITERS");
  const char* seed_env = std::getenv("TERN_IMAGE_FUZZ_SEED");
  const int iters = it_env ? std::atoi(it_env) : 3000;
  std::mt19937 rng(seed_env ? uint32_t(std::atoi(seed_env)) : 42u);
  const std::vector<Bytes> seeds = {encode(pattern(24, 17), "png"), encode(pattern(9, 9), "bmp"),
                                    encode(pattern(16, 16), "jpg"), kRedGif};
  int decoded = 0, refused = 0;
  for (int iter = 0; iter < iters; ++iter) {
    Bytes b = seeds[size_t(iter) % seeds.size()];
    const int edits = 1 + int(rng() % 8);
    for (int k = 0; k < edits; ++k) {
      const size_t at = rng() % b.size();
      switch (rng() % 4) {
        case 0:
          b[at] = uint8_t(rng());
          break;
        case 1:
          b[at] ^= uint8_t(1u << (rng() % 8));
          break;
        case 2:
          b.resize(std::max<size_t>(1, at));
          break;
        default:
          b.insert(b.begin() + long(at), uint8_t(rng()));
          break;
      }
    }
    try {
      const Image img = decode_image(b, DecodeLimits{1 << 20});
      ASSERT_EQ(img.rgb.size(), size_t(img.width) * size_t(img.height) * 3);
      ++decoded;
    } catch (const ImageError&) {
      ++refused;
    }
  }
  EXPECT_EQ(decoded + refused, iters);
  EXPECT_GT(refused, 0);
}

// Found by fuzz_image: a PNG header claiming about 2^32 x 2^32 pixels
// overflowed int64 in the pixel-limit check, so the bomb got past it (the
// message then blamed corrupt data). It is refused as over the limit.
TEST(Image, RefusesHugePngHeaderWithoutOverflow) {
  Bytes png = {0x89, 'P',  'N',  'G',  0x0d, 0x0a, 0x1a, 0x0a, 0,    0, 0, 13, 'I', 'H', 'D',
               'R',  0xff, 0xff, 0xff, 0x00, 0xff, 0xff, 0xff, 0x00, 8, 2, 0,  0,   0};
  try {
    decode_image(png);
    FAIL() << "decoded";
  } catch (const ImageError& e) {
    EXPECT_NE(std::string(e.what()).find("over the limit"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tern::vision
