#include "tern/vision/preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tern/core/error.h"

namespace tern::vision {
namespace {

constexpr int kFracBits = 22;  // 32 - 8 (pixel) - 2 (headroom), as Pillow
constexpr double kLanczosSupport = 3.0;

double sinc(double x) {
  if (x == 0.0) return 1.0;
  const double px = x * 3.14159265358979323846;
  return std::sin(px) / px;
}

double lanczos3(double x) {
  return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3.0) : 0.0;
}

double triangle(double x) {  // Pillow's BILINEAR
  x = std::abs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubic(double x) {  // Pillow's BICUBIC: Keys' cubic with a = -0.5
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

double filter_support(ResizeFilter f) {
  switch (f) {
    case ResizeFilter::Lanczos:
      return kLanczosSupport;
    case ResizeFilter::Bicubic:
      return 2.0;
    case ResizeFilter::Bilinear:
      break;
  }
  return 1.0;
}
double filter_weight(ResizeFilter f, double x) {
  switch (f) {
    case ResizeFilter::Lanczos:
      return lanczos3(x);
    case ResizeFilter::Bicubic:
      return bicubic(x);
    case ResizeFilter::Bilinear:
      break;
  }
  return triangle(x);
}

// The taps of one axis: output i reads inputs [first[i], first[i] + count[i])
// with fixed-point weights w[i * ksize + k].
struct Taps {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> w;
};

Taps make_taps(int in_size, int out_size, ResizeFilter filter) {
  const double scale = double(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);  // widen only when shrinking
  const double support = filter_support(filter) * filter_scale;
  Taps t;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.w.assign(size_t(out_size) * t.ksize, 0);
  std::vector<double> w(t.ksize);
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;
    const int lo = std::max(0, int(center - support + 0.5));
    const int hi = std::min(in_size, int(center + support + 0.5));
    double sum = 0.0;
    for (int k = 0; k < hi - lo; ++k) {
      w[k] = filter_weight(filter, (k + lo - center + 0.5) / filter_scale);
      sum += w[k];
    }
    for (int k = 0; k < hi - lo; ++k) {
      const double v = sum != 0.0 ? w[k] / sum : w[k];
      // Pillow rounds half away from zero by adding +-0.5 and truncating.
      t.w[size_t(i) * t.ksize + k] = int32_t(v * (1 << kFracBits) + (v < 0 ? -0.5 : 0.5));
    }
    t.first[i] = lo;
    t.count[i] = hi - lo;
  }
  return t;
}

uint8_t clip8(int32_t acc) {
  const int32_t v = acc >> kFracBits;
  return uint8_t(std::clamp(v, 0, 255));
}

// src (h, w_in, 3) -> (h, w_out, 3)
std::vector<uint8_t> resize_rows(const std::vector<uint8_t>& src, int w_in, int h, int w_out,
                                 ResizeFilter f) {
  const Taps t = make_taps(w_in, w_out, f);
  std::vector<uint8_t> out(size_t(w_out) * h * 3);
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = src.data() + size_t(y) * w_in * 3;
    for (int x = 0; x < w_out; ++x) {
      const int32_t* k = &t.w[size_t(x) * t.ksize];
      const uint8_t* p = row + size_t(t.first[x]) * 3;
      int32_t acc[3] = {1 << (kFracBits - 1), 1 << (kFracBits - 1), 1 << (kFracBits - 1)};
      for (int i = 0; i < t.count[x]; ++i)
        for (int c = 0; c < 3; ++c) acc[c] += p[i * 3 + c] * k[i];
      for (int c = 0; c < 3; ++c) out[(size_t(y) * w_out + x) * 3 + c] = clip8(acc[c]);
    }
  }
  return out;
}

// src (h_in, w, 3) -> (h_out, w, 3)
std::vector<uint8_t> resize_cols(const std::vector<uint8_t>& src, int w, int h_in, int h_out,
                                 ResizeFilter f) {
  const Taps t = make_taps(h_in, h_out, f);
  const size_t row = size_t(w) * 3;
  std::vector<uint8_t> out(row * h_out);
  std::vector<int32_t> acc(row);
  for (int y = 0; y < h_out; ++y) {
    std::fill(acc.begin(), acc.end(), 1 << (kFracBits - 1));
    for (int i = 0; i < t.count[y]; ++i) {
      const uint8_t* s = src.data() + size_t(t.first[y] + i) * row;
      const int32_t k = t.w[size_t(y) * t.ksize + i];
      for (size_t j = 0; j < row; ++j) acc[j] += s[j] * k;
    }
    for (size_t j = 0; j < row; ++j) out[y * row + j] = clip8(acc[j]);
  }
  return out;
}

Image crop(const Image& img, int x0, int y0, int size) {
  Image out{size, size, std::vector<uint8_t>(size_t(size) * size * 3)};
  for (int y = 0; y < size; ++y)
    std::copy_n(&img.rgb[(size_t(y0 + y) * img.width + x0) * 3], size_t(size) * 3,
                &out.rgb[size_t(y) * size * 3]);
  return out;
}

// idefics3: the grid of tiles row by row, each "<fake_token_around_image>
// <row_r_col_c>" then its rows, "\n" between grid rows; then "\n\n
// <fake_token_around_image><global-img>", the global image's rows and
// "<fake_token_around_image>" (llama.cpp puts the global image last).
PreprocessedImage preprocess_idefics3(const VisionConfig& c, const Image& img) {
  const int tile = c.image_size;
  const int longest = c.preproc_image_size;
  if (longest <= 0)
    throw InvalidArgument(
        "idefics3 projector without clip.vision.preproc_image_size: this preprocessing path is "
        "not supported");
  const double aspect = double(img.width) / img.height;
  int w = longest, h = longest;
  if (img.width >= img.height) {
    h = int(longest / aspect);
    h += h % 2;
  } else {
    w = int(longest * aspect);
    w += w % 2;
  }
  w = std::max(w, 1);
  h = std::max(h, 1);
  const int gx = (w + tile - 1) / tile, gy = (h + tile - 1) / tile;
  const Image refined = resize_lanczos(resize_lanczos(img, w, h), gx * tile, gy * tile);

  PreprocessedImage out;
  out.grid_x = gx;
  out.grid_y = gy;
  for (int y = 0; y < gy; ++y) {
    for (int x = 0; x < gx; ++x) {
      out.layout.push_back({"<fake_token_around_image><row_" + std::to_string(y + 1) + "_col_" +
                                std::to_string(x + 1) + ">",
                            -1});
      out.layout.push_back({"", int(out.tiles.size())});
      out.tiles.push_back(
          normalize_tile(crop(refined, x * tile, y * tile, tile), c.image_mean, c.image_std));
    }
    if (y != gy - 1) out.layout.push_back({"\n", -1});
  }
  out.layout.push_back({"\n\n<fake_token_around_image><global-img>", -1});
  out.layout.push_back({"", int(out.tiles.size())});
  out.layout.push_back({"<fake_token_around_image>", -1});
  out.tiles.push_back(
      normalize_tile(resize_lanczos(refined, tile, tile), c.image_mean, c.image_std));
  return out;
}

// llama.cpp's fixed-size preprocessor (PAD_CEIL): a Pillow resize keeping
// the aspect ratio (sides rounded up) to fit image_size x image_size, centred
// on `pad` (RGB).
Image fit_and_pad(const Image& img, int S, ResizeFilter filter, const std::array<uint8_t, 3>& pad) {
  const float scale = std::min(float(S) / img.width, float(S) / img.height);
  const int w = std::min(int(std::ceil(img.width * scale)), S);
  const int h = std::min(int(std::ceil(img.height * scale)), S);
  const Image r = resize_image(img, w, h, filter);
  Image canvas{S, S, std::vector<uint8_t>(size_t(S) * S * 3)};
  for (size_t i = 0; i < canvas.rgb.size(); ++i) canvas.rgb[i] = pad[i % 3];
  const int ox = (S - w) / 2, oy = (S - h) / 2;
  for (int y = 0; y < h; ++y)
    std::copy_n(&r.rgb[size_t(y) * w * 3], size_t(w) * 3,
                &canvas.rgb[(size_t(oy + y) * S + ox) * 3]);
  return canvas;
}

// gemma3: bilinear, black padding; "<start_of_image>" rows "<end_of_image>".
// (transformers' Gemma3ImageProcessor stretches to the square instead; the two
// agree on square images. tern follows llama.cpp here so the pair matches
// what users run; see tests/fixtures/vision/README.md.)
PreprocessedImage preprocess_gemma3(const VisionConfig& c, const Image& img) {
  const Image canvas = fit_and_pad(img, c.image_size, ResizeFilter::Bilinear, {0, 0, 0});
  PreprocessedImage out;
  out.tiles.push_back(normalize_tile(canvas, c.image_mean, c.image_std));
  out.layout = {{"<start_of_image>", -1}, {"", 0}, {"<end_of_image>", -1}};
  return out;
}

// mlp (LLaVA-1.5): bicubic, padded with the mean colour; the rows alone.
PreprocessedImage preprocess_llava(const VisionConfig& c, const Image& img) {
  std::array<uint8_t, 3> pad{};
  for (int i = 0; i < 3; ++i)
    pad[size_t(i)] = uint8_t(std::clamp(int(c.image_mean[size_t(i)] * 255.0f), 0, 255));
  const Image canvas = fit_and_pad(img, c.image_size, ResizeFilter::Bicubic, pad);
  PreprocessedImage out;
  out.tiles.push_back(normalize_tile(canvas, c.image_mean, c.image_std));
  out.layout = {{"", 0}};
  return out;
}

}  // namespace

Image resize_lanczos(const Image& src, int width, int height) {
  return resize_image(src, width, height, ResizeFilter::Lanczos);
}

Image resize_image(const Image& src, int width, int height, ResizeFilter f) {
  if (width <= 0 || height <= 0 || width > 65536 || height > 65536)
    throw InvalidArgument("resize target " + std::to_string(width) + "x" + std::to_string(height) +
                          " is out of range");
  if (width == src.width && height == src.height) return src;
  std::vector<uint8_t> px = src.rgb;
  if (width != src.width) px = resize_rows(px, src.width, src.height, width, f);
  if (height != src.height) px = resize_cols(px, width, src.height, height, f);
  return Image{width, height, std::move(px)};
}

PixelTile normalize_tile(const Image& img, const std::array<float, 3>& mean,
                         const std::array<float, 3>& std_dev) {
  PixelTile t{img.width, std::vector<float>(img.rgb.size())};
  for (size_t i = 0; i < img.rgb.size(); ++i) {
    const int ch = int(i % 3);
    t.pixels[i] = (float(img.rgb[i]) / 255.0f - mean[ch]) / std_dev[ch];
  }
  return t;
}

PreprocessedImage preprocess(const VisionConfig& c, const Image& img) {
  if (img.width <= 0 || img.height <= 0 || img.rgb.size() != size_t(img.width) * img.height * 3)
    throw InvalidArgument("preprocess: empty or inconsistent image");
  switch (c.projector) {
    case ProjectorType::Idefics3:
      return preprocess_idefics3(c, img);
    case ProjectorType::Gemma3:
      return preprocess_gemma3(c, img);
    case ProjectorType::Mlp:
      return preprocess_llava(c, img);
  }
  throw InvalidArgument("preprocessing for projector type '" +
                        std::string(projector_name(c.projector)) + "' is not implemented");
}

}  // namespace tern::vision
