#include "tern/vision/pixel_hash.h"

namespace tern::vision {

Sha256Digest pixel_hash(const Image& img) {
  Sha256 h;
  h.update_u32(uint32_t(img.width)).update_u32(uint32_t(img.height)).update_u32(3);
  h.update(img.rgb.data(), img.rgb.size());
  return h.finish();
}

}  // namespace tern::vision
