#include "tern/vision/media_source.h"

#include <gtest/gtest.h>

#include <fstream>

#include "media_test_util.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb_image_write.h>  // the implementation is compiled in image_test.cpp
#pragma GCC diagnostic pop

#ifdef TERN_HAVE_WEBP
#include <webp/encode.h>
#endif

namespace tern::vision::testing {

void write_file(const std::filesystem::path& p, const Bytes& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

namespace {
void append(void* ctx, void* data, int n) {
  auto* out = static_cast<Bytes*>(ctx);
  auto* p = static_cast<uint8_t*>(data);
  out->insert(out->end(), p, p + n);
}
}  // namespace

Bytes encode_png(const Image& img) {
  Bytes out;
  EXPECT_TRUE(stbi_write_png_to_func(append, &out, img.width, img.height, 3, img.rgb.data(),
                                     img.width * 3));
  return out;
}

Bytes encode_jpeg(const Image& img, int quality) {
  Bytes out;
  EXPECT_TRUE(
      stbi_write_jpg_to_func(append, &out, img.width, img.height, 3, img.rgb.data(), quality));
  return out;
}

namespace {

namespace fs = std::filesystem;

MediaPolicy policy_for(const fs::path& dir) {
  MediaPolicy p;
  p.media_dir = dir.string();
  return p;
}

TEST(MediaSource, DataUrlDecodesAndTheMimeTypeIsNotTrusted) {
  const Image src = test_pattern(13, 7);
  const Bytes png = encode_png(src);
  for (const char* mime : {"image/png", "image/jpeg", "application/octet-stream", ""}) {
    const Image got = load_image_url(data_url(png, mime), MediaPolicy{});
    EXPECT_EQ(got.width, 13);
    EXPECT_EQ(got.height, 7);
    EXPECT_EQ(got.rgb, src.rgb) << mime;
  }
}

TEST(MediaSource, Base64IsValidatedStrictly) {
  EXPECT_EQ(decode_data_url("data:;base64,TWFu", 100), (Bytes{'M', 'a', 'n'}));
  EXPECT_EQ(decode_data_url("data:;base64,TWE=", 100), (Bytes{'M', 'a'}));
  EXPECT_EQ(decode_data_url("data:;base64,TQ==", 100), (Bytes{'M'}));
  std::string msg;
  for (const char* bad : {"data:image/png;base64,TWF",        // length not a multiple of 4
                          "data:image/png;base64,TW!u",       // outside the alphabet
                          "data:image/png;base64,TW=u",       // padding in the middle
                          "data:image/png;base64,TR==",       // non-zero pad bits
                          "data:image/png;base64,TWF uTWFu",  // whitespace
                          "data:image/png;base64,",           // nothing
                          "data:image/png;base64"}) {         // no comma
    EXPECT_EQ(error_kind([&] { decode_data_url(bad, 100); }, &msg), MediaErrorKind::Invalid) << bad;
  }
  EXPECT_EQ(error_kind([&] { decode_data_url("data:text/plain,hello", 100); }),
            MediaErrorKind::Unsupported);
  EXPECT_EQ(error_kind([&] { decode_data_url("data:;base64,TWFuTWFu", 5); }, &msg),
            MediaErrorKind::TooLarge);
  EXPECT_NE(msg.find("over the limit"), std::string::npos) << msg;
}

TEST(MediaSource, CorruptTruncatedAndNonImageDataAreRefused) {
  const Bytes png = encode_png(test_pattern(16, 16));
  const Bytes truncated(png.begin(), png.begin() + long(png.size() / 2));
  const Bytes text = {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'};
  std::string msg;
  EXPECT_EQ(error_kind([&] { load_image_url(data_url(truncated), {}); }, &msg),
            MediaErrorKind::Invalid);
  EXPECT_NE(msg.find("PNG"), std::string::npos) << msg;
  EXPECT_EQ(error_kind([&] { load_image_url(data_url(text), {}); }, &msg), MediaErrorKind::Invalid);
  EXPECT_NE(msg.find("not an image"), std::string::npos) << msg;
}

TEST(MediaSource, ByteAndPixelLimits) {
  const Bytes png = encode_png(test_pattern(40, 30));
  MediaPolicy p;
  p.max_pixels = 40 * 30 - 1;
  EXPECT_EQ(error_kind([&] { load_image_url(data_url(png), p); }), MediaErrorKind::TooLarge);
  p.max_pixels = 40 * 30;
  EXPECT_NO_THROW(load_image_url(data_url(png), p));
  p.max_bytes = png.size() - 1;
  EXPECT_EQ(error_kind([&] { load_image_url(data_url(png), p); }), MediaErrorKind::TooLarge);
}

TEST(MediaSource, LocalPathsStayInsideTheMediaDirectory) {
  TempDir tmp;
  const fs::path media = tmp.path() / "media";
  fs::create_directories(media / "sub");
  const Image src = test_pattern(9, 5);
  const Bytes png = encode_png(src);
  write_file(media / "sub" / "a b.png", png);
  write_file(tmp.path() / "secret.png", png);
  fs::create_symlink(tmp.path() / "secret.png", media / "escape.png");
  fs::create_symlink(media / "sub" / "a b.png", media / "inside.png");
  fs::create_symlink(tmp.path(), media / "up");
  const MediaPolicy p = policy_for(media);

  // Inside: relative, absolute, file:// (percent-escaped), a symlink staying inside.
  for (const std::string& url : {std::string("sub/a b.png"), (media / "sub" / "a b.png").string(),
                                 "file://" + (media / "sub").string() + "/a%20b.png",
                                 "file://localhost" + (media / "sub").string() + "/a%20b.png",
                                 std::string("inside.png"), std::string("sub/../sub/a b.png")}) {
    EXPECT_EQ(load_image_url(url, p).rgb, src.rgb) << url;
  }
  // Outside: `..`, another absolute path, symlinks out (file and directory).
  std::string msg;
  for (const std::string& url :
       {std::string("../secret.png"), std::string("sub/../../secret.png"),
        (tmp.path() / "secret.png").string(), "file://" + (tmp.path() / "secret.png").string(),
        std::string("escape.png"), std::string("up/secret.png"), std::string("/etc/passwd"),
        std::string("file://otherhost/etc/passwd")}) {
    EXPECT_EQ(error_kind([&] { load_image_url(url, p); }, &msg), MediaErrorKind::Forbidden) << url;
  }
  // Missing files and directories are plain bad requests.
  EXPECT_EQ(error_kind([&] { load_image_url("nope.png", p); }), MediaErrorKind::Invalid);
  EXPECT_EQ(error_kind([&] { load_image_url("sub", p); }), MediaErrorKind::Invalid);
  // No media directory: every local path is refused.
  EXPECT_EQ(error_kind([&] { load_image_url("sub/a b.png", MediaPolicy{}); }, &msg),
            MediaErrorKind::Forbidden);
  EXPECT_NE(msg.find("--media-dir"), std::string::npos) << msg;
}

TEST(MediaSource, TheSamePicturePassedAnyWayHasOneHash) {
  TempDir tmp;
  const Image src = test_pattern(21, 11, 7);
  const Bytes png = encode_png(src);
  write_file(tmp.path() / "x.png", png);
  const MediaPolicy p = policy_for(tmp.path());
  const Sha256Digest a = pixel_hash(load_image_url(data_url(png), p));
  EXPECT_EQ(pixel_hash(load_image_url("x.png", p)), a);
  EXPECT_EQ(pixel_hash(load_image_url("file://" + (tmp.path() / "x.png").string(), p)), a);
  EXPECT_EQ(a, pixel_hash(src));
  // A lossy re-encoding is a different picture.
  EXPECT_NE(pixel_hash(load_image_url(data_url(encode_jpeg(src)), p)), a);
}

TEST(MediaSource, RemoteUrlsNeedThePolicyAndAFetcher) {
  MediaPolicy p;
  std::string msg;
  EXPECT_EQ(error_kind([&] { load_image_url("https://example.com/a.png", p); }, &msg),
            MediaErrorKind::Forbidden);
  EXPECT_NE(msg.find("--allow-remote-media"), std::string::npos) << msg;
  p.allow_remote = true;
  EXPECT_EQ(error_kind([&] { load_image_url("http://example.com/a.png", p); }),
            MediaErrorKind::Unsupported);
  EXPECT_EQ(error_kind([&] { load_image_url("ftp://example.com/a.png", p); }, &msg),
            MediaErrorKind::Unsupported);
  EXPECT_NE(msg.find("ftp"), std::string::npos) << msg;
}

TEST(MediaSource, WebP) {
  const Image src = test_pattern(17, 9, 3);
#ifdef TERN_HAVE_WEBP
  uint8_t* out = nullptr;
  const size_t n =
      WebPEncodeLosslessRGB(src.rgb.data(), src.width, src.height, src.width * 3, &out);
  ASSERT_GT(n, 0u);
  const Bytes webp(out, out + n);
  WebPFree(out);
  EXPECT_TRUE(webp_supported());
  const Image got = load_image_url(data_url(webp, "image/webp"), {});
  EXPECT_EQ(got.width, 17);
  EXPECT_EQ(got.height, 9);
  EXPECT_EQ(got.rgb, src.rgb);
  MediaPolicy p;
  p.max_pixels = 100;
  EXPECT_EQ(error_kind([&] { decode_media_image(webp, p); }), MediaErrorKind::TooLarge);
  const Bytes cut(webp.begin(), webp.begin() + long(webp.size() / 2));
  EXPECT_EQ(error_kind([&] { decode_media_image(cut, {}); }), MediaErrorKind::Invalid);
#else
  const Bytes riff = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P', 'V', 'P', '8', 'L'};
  EXPECT_EQ(error_kind([&] { decode_media_image(riff, {}); }), MediaErrorKind::Unsupported);
#endif
}

}  // namespace
}  // namespace tern::vision::testing
