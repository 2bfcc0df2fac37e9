// libFuzzer target for image input: vision::decode_media_image, i.e. tern's
// format sniffing and header checks (pixel limit before any pixel is decoded)
// in front of stb_image (PNG, JPEG, BMP, GIF) and libwebp (WebP). stb_image
// is compiled into the target with instrumentation; libwebp is the system
// library. Seeds: `fuzz_seeds image DIR`. Every input must decode or be
// refused with MediaError; a decoded image must be non-empty, within the
// pixel limit, and hold exactly width x height RGB pixels.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "tern/vision/media_source.h"

namespace {

using tern::fuzz::check;

// Small enough that a fuzzed header cannot make one input allocate much.
constexpr int64_t kMaxPixels = 1 << 20;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tern::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::vision::MediaPolicy policy;
  policy.max_pixels = kMaxPixels;
  try {
    const tern::vision::Image img =
        tern::vision::decode_media_image(std::span<const uint8_t>(data, size), policy);
    check(img.width > 0 && img.height > 0);
    check(int64_t(img.width) * img.height <= kMaxPixels);
    check(img.rgb.size() == size_t(img.width) * size_t(img.height) * 3);
    volatile auto h = tern::vision::pixel_hash(img)[0];
    (void)h;
  } catch (const tern::vision::MediaError&) {
    // Refused cleanly.
  }
  return 0;
}
