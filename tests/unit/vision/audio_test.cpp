// Audio decoding through FFmpeg's libraries: clips encoded here with
// libavcodec (WAV, FLAC, MP3, Ogg Vorbis / Opus, stereo and other rates)
// come back as 16 kHz mono samples that match the source; the same sound in
// two lossless formats has one hash; damaged, empty, over-long and unlisted
// inputs are MediaErrors of the right kind.
#include "tern/vision/audio.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "audio_encode.h"
#include "media_test_util.h"

namespace tern::vision::testing {
namespace {

using audio_clips::kFlac;
using audio_clips::kMp3;
using audio_clips::kOpus;
using audio_clips::kVorbis;
using audio_clips::kWav;
using audio_clips::kWav44;
using audio_clips::tone;

Bytes make_clip(const audio_clips::Format& f, double seconds, int channels = 1) {
  return audio_clips::encode(f, seconds, channels);
}

// The RMS difference between the decoded clip and the source tone at 16 kHz
// (scaled by `gain`), over its middle (codec delay and priming aside: the
// best alignment within 0.1 s).
double rms_error(const AudioClip& a, float gain) {
  const int n = int(a.samples.size());
  double best = 1e9;
  for (int lag = 0; lag < 1600 && lag < n / 4; ++lag) {
    double e = 0;
    int k = 0;
    for (int i = n / 4; i < 3 * n / 4; ++i, ++k) {
      const double d = a.samples[size_t(i)] - gain * tone(i - lag, 16000);
      e += d * d;
    }
    best = std::min(best, std::sqrt(e / k));
  }
  return best;
}

TEST(Audio, DecodesEveryListedFormatTo16kMono) {
  for (const audio_clips::Format& f : {kWav, kWav44, kFlac, kMp3, kOpus, kVorbis}) {
    const Bytes clip = make_clip(f, 1.0);
    if (clip.empty()) {
      // Debian's libavcodec has every one of these encoders; say which is missing.
      ADD_FAILURE() << "libavcodec has no " << f.encoder << " encoder to make the test clip";
      continue;
    }
    const AudioClip a = decode_audio(clip, {}, {});
    EXPECT_EQ(a.sample_rate, 16000);
    EXPECT_NEAR(a.seconds(), 1.0, 0.1) << f.encoder;
    // Lossless sources match to the resampler's precision, lossy ones to the codec's.
    const bool lossless =
        std::string(f.encoder).starts_with("pcm") || std::string(f.encoder) == "flac";
    EXPECT_LT(rms_error(a, 1.0f), lossless ? 0.01 : 0.08) << f.encoder;
  }
}

TEST(Audio, StereoIsAveragedToMono) {
  const Bytes clip = make_clip(kWav, 0.5, 2);
  const AudioClip a = decode_audio(clip, {}, {});
  EXPECT_LT(rms_error(a, 0.75f), 0.01);
}

TEST(Audio, TheSameSoundInTwoLosslessFormatsHasOneHash) {
  const AudioClip wav = decode_audio(make_clip(kWav, 1.0), {}, {});
  const AudioClip flac = decode_audio(make_clip(kFlac, 1.0), {}, {});
  ASSERT_EQ(wav.samples.size(), flac.samples.size());
  EXPECT_EQ(to_hex(pcm_hash(wav)), to_hex(pcm_hash(flac)));
  const AudioClip other = decode_audio(make_clip(kWav, 0.9), {}, {});
  EXPECT_NE(to_hex(pcm_hash(wav)), to_hex(pcm_hash(other)));
}

TEST(Audio, LimitsAndBadInputAreMediaErrors) {
  const Bytes clip = make_clip(kWav, 2.0);
  auto kind = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const MediaError& e) {
      return e.kind();
    }
    ADD_FAILURE() << "no MediaError";
    return MediaErrorKind::Fetch;
  };
  EXPECT_EQ(kind([&] { decode_audio(clip, {.max_seconds = 1.5}, {}); }), MediaErrorKind::TooLarge);
  EXPECT_NO_THROW(decode_audio(clip, {.max_seconds = 2.5}, {}));
  MediaPolicy small;
  small.max_bytes = 1000;
  EXPECT_EQ(kind([&] { decode_audio(clip, {}, small); }), MediaErrorKind::TooLarge);
  EXPECT_EQ(kind([&] { decode_audio({}, {}, {}); }), MediaErrorKind::Invalid);
  const Bytes junk(5000, 0x5a);
  EXPECT_EQ(kind([&] { decode_audio(junk, {}, {}); }), MediaErrorKind::Invalid);
  // A truncated file: the header promises more than the data holds; what is
  // there decodes, or it is refused, and nothing crashes.
  const Bytes cut(clip.begin(), clip.begin() + 30);
  EXPECT_EQ(kind([&] { decode_audio(cut, {}, {}); }), MediaErrorKind::Invalid);
  // A PNG is not audio.
  const Bytes png = encode_png(test_pattern(8, 8));
  EXPECT_EQ(kind([&] { decode_audio(png, {}, {}); }), MediaErrorKind::Invalid);
  EXPECT_EQ(kind([&] { decode_audio(clip, {.sample_rate = 10}, {}); }), MediaErrorKind::Invalid);
}

}  // namespace
}  // namespace tern::vision::testing
