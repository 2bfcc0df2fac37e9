// libFuzzer target for video input: vision::decode_video, i.e. tern's
// in-memory AVIO reader, the container allow-list, the frame sampling and
// limits, and the RGB conversion around FFmpeg's demuxers and decoders (the
// system libraries, not instrumented). Seeds: `fuzz_seeds video DIR` (tiny
// MJPEG/AVI, MPEG-4/MP4 and Matroska clips). Every input must decode or be
// refused with MediaError; decoded frames must obey the limits and carry
// non-decreasing timestamps.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "tern/vision/video.h"

namespace {

using tern::fuzz::check;

constexpr int64_t kMaxPixels = 1 << 18;
constexpr int kMaxFrames = 4;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tern::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::vision::MediaPolicy policy;
  policy.max_pixels = kMaxPixels;
  const tern::vision::VideoOptions opts{
      .fps = 4.0, .max_frames = kMaxFrames, .max_decoded_frames = 64};
  try {
    const tern::vision::VideoFrames v =
        tern::vision::decode_video(std::span<const uint8_t>(data, size), opts, policy);
    check(!v.frames.empty() && v.frames.size() <= size_t(kMaxFrames));
    check(v.timestamps_s.size() == v.frames.size());
    for (size_t i = 0; i < v.frames.size(); ++i) {
      const tern::vision::Image& f = v.frames[i];
      check(f.width > 0 && f.height > 0 && int64_t(f.width) * f.height <= kMaxPixels);
      check(f.rgb.size() == size_t(f.width) * size_t(f.height) * 3);
      check(i == 0 || v.timestamps_s[i] >= v.timestamps_s[i - 1]);
    }
  } catch (const tern::vision::MediaError&) {
    // Refused cleanly.
  }
  return 0;
}
