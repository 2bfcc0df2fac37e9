// libFuzzer target for audio input: vision::decode_audio, i.e. tern's
// in-memory AVIO reader and container allow-list (shared with video), the
// duration limit from the header and while decoding, and the resampling to
// 16 kHz mono around FFmpeg's demuxers and decoders (the system libraries,
// not instrumented). Seeds: `fuzz_seeds audio DIR` (WAV, FLAC, MP3, Ogg
// Opus and Vorbis clips). Every input must decode or be refused with
// MediaError; decoded clips must obey the limit and be finite.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_util.h"
#include "tern/vision/audio.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tern::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tern::fuzz::check;
  const tern::vision::AudioOptions opts{.sample_rate = 16000, .max_seconds = 2.0};
  try {
    const tern::vision::AudioClip a =
        tern::vision::decode_audio(std::span<const uint8_t>(data, size), opts, {});
    check(!a.samples.empty() && a.sample_rate == 16000);
    check(a.samples.size() <= size_t(2.0 * 16000) + 1);
    for (float v : a.samples) check(std::isfinite(v));
    (void)tern::vision::pcm_hash(a);
  } catch (const tern::vision::MediaError&) {
    // Refused cleanly.
  }
  return 0;
}
