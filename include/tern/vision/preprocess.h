#pragma once
// Image preprocessing as llama.cpp's mtmd does it, per projector type: the
// decoded RGB image becomes one or more square tiles of image_size pixels,
// normalized by the file's mean/std, plus the text pieces that wrap their
// embeddings in the prompt.
//
// idefics3 (SmolVLM), with clip.vision.preproc_image_size = L (the longest
// edge; HF's size["longest_edge"]):
//   1. resize keeping the aspect ratio so the longer side is L; the shorter
//      side is truncated, then rounded up to even;
//   2. resize (aspect not kept) up to multiples of image_size: a grid of
//      grid_x x grid_y tiles, cut row by row;
//   3. the global image: step 2's image resized to image_size x image_size.
//   All resizes are Pillow's Lanczos (a = 3) in 8-bit fixed point, so pixels
//   match llama.cpp's (and HF's PIL path) exactly; then x / 255, (x - mean) / std.
//
// gemma3: one tile; bilinear resize keeping the aspect ratio, centred on
// black (llama.cpp's fixed-size preprocessor with PAD_CEIL).
//
// mlp (LLaVA-1.5): one tile; the same fixed-size path with Pillow's bicubic
// (a = -0.5) and the mean colour as the padding (int(mean * 255) per channel:
// (122, 116, 104) for CLIP's mean, the colour llama.cpp hard-codes and
// LLaVA's expand2square uses). LLaVA pads to the square first and then
// resizes; llama.cpp resizes first and then pads -- the two differ only on
// the pixels at the edge of the padding. tern follows llama.cpp. No wrapping
// text: the rows replace the image marker.
#include <array>
#include <string>
#include <vector>

#include "tern/vision/image.h"
#include "tern/vision/vision_config.h"

namespace tern::vision {

// One encoder input: (size, size, 3) normalized floats, row-major, RGB interleaved.
struct PixelTile {
  int size = 0;
  std::vector<float> pixels;
};

// Where an image's embeddings go in the prompt: text pieces to tokenize
// (special tokens spelled out) and spans of one tile's embedding rows.
struct ImagePiece {
  std::string text;  // empty for a tile span
  int tile = -1;     // index into PreprocessedImage::tiles, -1 for text
};

struct PreprocessedImage {
  int grid_x = 0, grid_y = 0;    // tiles per row and column (0: no tiling)
  std::vector<PixelTile> tiles;  // the grid's tiles row by row, then the global image
  std::vector<ImagePiece> layout;
};

// Throws InvalidArgument when the config cannot be preprocessed (e.g. an
// idefics3 file without preproc_image_size: llama.cpp's other path is not
// implemented here yet).
PreprocessedImage preprocess(const VisionConfig& c, const Image& img);

enum class ResizeFilter { Lanczos, Bilinear, Bicubic };

// Pillow-compatible resize (separable, fixed point with 22 fraction bits),
// with Pillow's filter supports (3 for Lanczos, 2 for bicubic, 1 for bilinear), widened by
// the scale when shrinking.
Image resize_image(const Image& src, int width, int height, ResizeFilter f);

// Pillow-compatible resize (separable, fixed point with 22 fraction bits):
// Lanczos with support 3, widened by the scale when shrinking.
Image resize_lanczos(const Image& src, int width, int height);

// (x / 255 - mean) / std for every channel of a size x size image.
PixelTile normalize_tile(const Image& img, const std::array<float, 3>& mean,
                         const std::array<float, 3>& std_dev);

}  // namespace tern::vision
