#pragma once
// The synthetic test images the vision oracle is recorded on, as plain
// integer formulas: the oracle harness (scripts/oracle/mtmd_embed.cpp, built
// against llama.cpp) and tern's oracle_test.cpp both include this file, so
// they make the same pixels without sharing a build.
#include <cstdint>
#include <string>
#include <vector>

namespace oracle_images {

struct Rgb {
  std::string name;
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // (height, width, 3)
};

inline Rgb make(const std::string& name) {
  Rgb img{name, 0, 0, {}};
  if (name == "gradient") {  // 48 x 48, R along x, G along y, B diagonal
    img.width = img.height = 48;
  } else if (name == "noise") {  // 37 x 29: odd sizes, landscape
    img.width = 37;
    img.height = 29;
  } else if (name == "text") {  // 30 x 90: portrait, dark strokes on light
    img.width = 30;
    img.height = 90;
  } else {
    return img;
  }
  img.rgb.resize(size_t(img.width) * img.height * 3);
  uint32_t state = 12345u;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      uint8_t* p = &img.rgb[(size_t(y) * img.width + x) * 3];
      if (name == "gradient") {
        p[0] = uint8_t(x * 255 / 47);
        p[1] = uint8_t(y * 255 / 47);
        p[2] = uint8_t((x + y) * 255 / 94);
      } else if (name == "noise") {
        for (int c = 0; c < 3; ++c) {
          state = state * 1664525u + 1013904223u;  // Numerical Recipes LCG
          p[c] = uint8_t(state >> 24);
        }
      } else {
        const bool ink = (y % 12 < 8) && ((x * 7 + y * 3) % 11 < 4);
        p[0] = ink ? 20 : 235;
        p[1] = ink ? 25 : 230;
        p[2] = ink ? 40 : 220;
      }
    }
  return img;
}

inline const char* const kNames[] = {"gradient", "noise", "text"};

}  // namespace oracle_images
