#pragma once
// Helpers shared by the media tests: generated images encoded to PNG / JPEG
// with stb_image_write (from image_test.cpp's translation unit), base64, and
// a temporary directory removed at the end of the test.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tern/vision/media_source.h"

namespace tern::vision::testing {

using Bytes = std::vector<uint8_t>;

inline Image test_pattern(int w, int h, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  Image img{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = uint8_t(rng() & 0xff);
  return img;
}

inline std::string base64(const Bytes& b) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= b.size(); i += 3) {
    const uint32_t v = uint32_t(b[i]) << 16 | uint32_t(b[i + 1]) << 8 | b[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += k[(v >> s) & 63];
  }
  if (b.size() - i == 1) {
    const uint32_t v = uint32_t(b[i]) << 16;
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += "==";
  } else if (b.size() - i == 2) {
    const uint32_t v = uint32_t(b[i]) << 16 | uint32_t(b[i + 1]) << 8;
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += k[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

inline std::string data_url(const Bytes& b, const std::string& mime = "image/png") {
  return "data:" + mime + ";base64," + base64(b);
}

// The MediaError kind `f` throws, or nullopt (with its message in `msg`).
template <typename F>
std::optional<MediaErrorKind> error_kind(F&& f, std::string* msg = nullptr) {
  try {
    f();
  } catch (const MediaError& e) {
    if (msg) *msg = e.what();
    return e.kind();
  }
  return std::nullopt;
}

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("tern-media-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void write_file(const std::filesystem::path& p, const Bytes& b);
Bytes encode_png(const Image& img);
Bytes encode_jpeg(const Image& img, int quality = 90);

}  // namespace tern::vision::testing
