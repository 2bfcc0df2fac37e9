// Audio decoding through FFmpeg's libraries: clips encoded here with
// libavcodec (WAV, FLAC, MP3, Ogg Vorbis / Opus, stereo and other rates)
// come back as 16 kHz mono samples that match the source; the same sound in
// two lossless formats has one hash; damaged, empty, over-long and unlisted
// inputs are MediaErrors of the right kind.
#include "tern/vision/audio.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>

#include "audio_encode.h"

extern "C" {
#include <libavutil/mem.h>
}
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

// The kind of MediaError `fn` throws (a test failure when it throws none).
MediaErrorKind kind(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const MediaError& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no MediaError";
  return MediaErrorKind::Fetch;
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

// FLAC's checksums (CRC-8 of a frame header, CRC-16 of a frame; MSB first).
template <typename T>
T flac_crc(const uint8_t* p, size_t n, T poly) {
  constexpr int kTop = int(sizeof(T)) * 8 - 1;
  T crc = 0;
  for (size_t i = 0; i < n; ++i) {
    crc = T(crc ^ T(T(p[i]) << (kTop - 7)));
    for (int b = 0; b < 8; ++b) crc = T((crc >> kTop) & 1 ? T(crc << 1) ^ poly : T(crc << 1));
  }
  return crc;
}

// A FLAC clip of `seconds` of the tone made at 16 kHz, then relabelled as
// `rate` Hz with no stated length: STREAMINFO's rate is rewritten and its
// sample count zeroed, and each frame header says "the rate in STREAMINFO"
// (its checksums redone). The decoder then hands out the same frames at
// `rate` and nothing tells the demuxer how long the clip is.
Bytes relabelled_flac(uint32_t rate, int channels, double seconds, int frame_size) {
  Bytes b = audio_clips::encode(kFlac, seconds, channels, frame_size);
  if (b.size() < 42 || std::memcmp(b.data(), "fLaC", 4) != 0) return {};
  uint8_t* si = b.data() + 8;  // STREAMINFO follows "fLaC" and its block header
  si[10] = uint8_t(rate >> 12);
  si[11] = uint8_t(rate >> 4);
  si[12] = uint8_t((si[12] & 0x0f) | ((rate & 0xf) << 4));
  si[13] &= 0xf0;
  std::memset(si + 14, 0, 4);
  size_t p = 4;  // past the metadata blocks
  for (bool last = false; !last && p + 4 <= b.size();) {
    last = (b[p] & 0x80) != 0;
    p += 4 + ((size_t(b[p + 1]) << 16) | (size_t(b[p + 2]) << 8) | b[p + 3]);
  }
  // Frame starts: a sync code, then a header whose CRC-8 holds, with frame
  // numbers 0, 1, 2, ... (16 kHz, so no rate bytes; blocking is fixed).
  std::vector<size_t> starts;
  for (size_t q = p; q + 6 < b.size(); ++q) {
    if (b[q] != 0xff || b[q + 1] != 0xf8 || (b[q + 2] & 0x0f) != 5) continue;
    size_t h = q + 4;
    uint32_t number = b[h];
    int extra = 0;
    if (number >= 0xc0) {
      extra = number >= 0xe0 ? 2 : 1;
      number &= extra == 2 ? 0x0f : 0x1f;
    }
    if (h + 1 + size_t(extra) + 3 > b.size()) break;
    for (int k = 1; k <= extra; ++k) number = (number << 6) | (b[h + size_t(k)] & 0x3f);
    h += 1 + size_t(extra);
    const int bs = b[q + 2] >> 4;
    h += bs == 6 ? 1 : bs == 7 ? 2 : 0;
    if (h >= b.size() || number != starts.size() ||
        flac_crc<uint8_t>(b.data() + q, h - q, 0x07) != b[h])
      continue;
    starts.push_back(q);
  }
  if (starts.empty()) return {};
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t q = starts[k], end = k + 1 < starts.size() ? starts[k + 1] : b.size();
    size_t h = q + 4;
    h += b[h] >= 0xe0 ? 3 : b[h] >= 0xc0 ? 2 : 1;
    const int bs = b[q + 2] >> 4;
    h += bs == 6 ? 1 : bs == 7 ? 2 : 0;
    b[q + 2] &= 0xf0;  // rate: see STREAMINFO
    b[h] = flac_crc<uint8_t>(b.data() + q, h - q, 0x07);
    const uint16_t crc = flac_crc<uint16_t>(b.data() + q, end - q - 2, 0x8005);
    b[end - 2] = uint8_t(crc >> 8);
    b[end - 1] = uint8_t(crc);
  }
  return b;
}

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// A clip at a rate far below the output's expands many times when
// resampled. A fuzzed clip (a long frame at a few Hz, no stated length) took
// the fuzzer past 2 GB in one frame, before any length check could run:
// rates below 1 kHz are refused, and a frame goes through the resampler in
// slices, the length checked after each.
TEST(Audio, LowRatesAreRefusedOrResampledInBoundedSlices) {
  const Bytes sane = relabelled_flac(16000, 1, 0.5, 0);
  ASSERT_FALSE(sane.empty()) << "could not relabel the FLAC clip";
  // Relabelled at its own rate, the clip still decodes (and to the same sound).
  const AudioClip same = decode_audio(sane, {}, {});
  EXPECT_NEAR(same.seconds(), 0.5, 0.05);
  EXPECT_EQ(to_hex(pcm_hash(same)), to_hex(pcm_hash(decode_audio(make_clip(kFlac, 0.5), {}, {}))));

  // 1 kHz, 8 channels, frames of 65535 samples (FLAC's longest), resampled
  // to 192 kHz: one frame is 12.6 M samples a channel, 400 MB of planes
  // converted at once. In slices, the clip is refused at the limit with a
  // few MB in use.
  const Bytes slow = relabelled_flac(1000, 8, 4.2, 65535);
  ASSERT_FALSE(slow.empty());
  const long before = peak_rss_kib();
  EXPECT_EQ(kind([&] { decode_audio(slow, {.sample_rate = 192000, .max_seconds = 2.0}, {}); }),
            MediaErrorKind::TooLarge);
  EXPECT_LT(peak_rss_kib() - before, 64 * 1024) << "KiB of peak RSS to refuse the clip";
  // With room for it, the slow clip decodes whole: 1 kHz -> 16 kHz.
  const AudioClip whole = decode_audio(slow, {.max_seconds = 70.0}, {});
  EXPECT_NEAR(whole.seconds(), 65.535 * 4.2 / 4.096, 0.5);

  // Below 1 kHz, a clip is refused as it opens.
  const Bytes one_hz = relabelled_flac(1, 8, 0.5, 0);
  ASSERT_FALSE(one_hz.empty());
  EXPECT_EQ(kind([&] { decode_audio(one_hz, {}, {}); }), MediaErrorKind::Invalid);
}

// A fuzzed 1.7 KB WAV (fuzz/crashes/audio/wav-list-2gb) states a 2.4 GB
// LIST chunk holding a 1.8 GB entry, and Debian's libavformat zero-filled
// that much before reading it. Chunks that run past the end of the file are
// refused before FFmpeg sees them, and FFmpeg's allocations are capped
// whatever the file says.
TEST(Audio, WavChunksMustFitAndFfmpegAllocationsAreCapped) {
  Bytes wav = make_clip(kWav, 0.2);
  ASSERT_GT(wav.size(), 44u);
  // Insert a LIST chunk after "fmt ": fitting, it decodes as before.
  const size_t fmt_end = 12 + 8 + 16;
  ASSERT_EQ(std::memcmp(wav.data() + 12, "fmt ", 4), 0);
  const std::string info = std::string("LIST") + '\x12' + std::string(3, '\0') + "INFOISFT" +
                           '\x06' + std::string(3, '\0') + std::string("tern!\0", 6);
  wav.insert(wav.begin() + fmt_end, info.begin(), info.end());
  const AudioClip a = decode_audio(wav, {}, {});
  EXPECT_NEAR(a.seconds(), 0.2, 0.02);
  // Stating more than the file holds (as the fuzzed file did) is refused.
  Bytes bad = wav;
  bad[fmt_end + 4] = 0x1a;
  bad[fmt_end + 7] = 0x92;  // 0x9200001a bytes
  const long before = peak_rss_kib();
  try {
    decode_audio(bad, {}, {});
    ADD_FAILURE() << "decoded a WAV whose LIST chunk runs past the end";
  } catch (const MediaError& e) {
    EXPECT_EQ(e.kind(), MediaErrorKind::Invalid);
    EXPECT_NE(std::string(e.what()).find("'LIST' chunk states 2449473562 bytes"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(peak_rss_kib() - before, 16 * 1024);
  // The cap, for any other path that trusts a size: decoding has set it to
  // the default policy's largest frame (32 M pixels at 8 bytes, and slack).
  void* big = av_malloc(size_t(512) << 20);
  EXPECT_EQ(big, nullptr);
  av_free(big);
  void* frame = av_malloc(size_t(128) << 20);
  EXPECT_NE(frame, nullptr);
  av_free(frame);
}

// A RIFF WAVE file's chunks (id, body) after the 12-byte header.
std::vector<std::pair<std::string, Bytes>> wav_chunks(const Bytes& wav) {
  std::vector<std::pair<std::string, Bytes>> out;
  for (size_t at = 12; at + 8 <= wav.size();) {
    uint32_t n;
    std::memcpy(&n, wav.data() + at + 4, 4);
    const size_t take = std::min<size_t>(n, wav.size() - at - 8);
    out.emplace_back(std::string(reinterpret_cast<const char*>(wav.data() + at), 4),
                     Bytes(wav.begin() + long(at + 8), wav.begin() + long(at + 8 + take)));
    at += 8 + take + (take & 1);
  }
  return out;
}

void put32(Bytes& b, uint32_t v, bool big) {
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (big ? 24 - 8 * i : 8 * i)));
}

// The same 16-bit PCM file as RF64 or BW64 (a ds64 chunk with the sizes, the
// 32-bit ones 0xffffffff) or as big-endian RIFX (sizes, fmt fields and
// samples byte-swapped).
Bytes rewrap_wav(const Bytes& wav, const std::string& magic) {
  const auto chunks = wav_chunks(wav);
  const bool rifx = magic == "RIFX";
  Bytes out(magic.begin(), magic.end());
  size_t data_size = 0;
  for (const auto& [id, body] : chunks)
    if (id == "data") data_size = body.size();
  put32(out, rifx ? uint32_t(wav.size() - 8) : 0xffffffffu, rifx);
  out.insert(out.end(), {'W', 'A', 'V', 'E'});
  if (!rifx) {
    out.insert(out.end(), {'d', 's', '6', '4'});
    put32(out, 28, false);
    const uint64_t sizes[3] = {wav.size() - 8 + 36, data_size, data_size / 2};
    for (uint64_t v : sizes) put32(out, uint32_t(v), false), put32(out, uint32_t(v >> 32), false);
    put32(out, 0, false);  // no table
  }
  for (auto [id, body] : chunks) {
    if (rifx &&
        id == "fmt ") {  // format, channels (16 bits); rate, byte rate (32); align, bits (16)
      for (size_t i : {0, 2, 12, 14}) std::swap(body[i], body[i + 1]);
      for (size_t i : {4, 8}) std::swap(body[i], body[i + 3]), std::swap(body[i + 1], body[i + 2]);
    }
    if (rifx && id == "data")
      for (size_t i = 0; i + 1 < body.size(); i += 2) std::swap(body[i], body[i + 1]);
    out.insert(out.end(), id.begin(), id.end());
    put32(out, !rifx && id == "data" ? 0xffffffffu : uint32_t(body.size()), rifx);
    out.insert(out.end(), body.begin(), body.end());
    if (body.size() & 1) out.push_back(0);
  }
  return out;
}

// RF64, BW64 and RIFX files go through the same chunk check as RIFF ones: a
// LIST chunk that states more than follows is refused before FFmpeg sees it.
TEST(Audio, Rf64Bw64AndRifxWavChunksMustFitToo) {
  Bytes wav = make_clip(kWav, 0.2);
  ASSERT_EQ(std::memcmp(wav.data() + 12, "fmt ", 4), 0);
  const size_t fmt_end = 12 + 8 + 16;
  const std::string info = std::string("LIST") + '\x12' + std::string(3, '\0') + "INFOISFT" +
                           '\x06' + std::string(3, '\0') + std::string("tern!\0", 6);
  wav.insert(wav.begin() + fmt_end, info.begin(), info.end());
  for (const std::string magic : {"RF64", "BW64", "RIFX"}) {
    SCOPED_TRACE(magic);
    const Bytes good = rewrap_wav(wav, magic);
    const AudioClip a = decode_audio(good, {}, {});
    EXPECT_NEAR(a.seconds(), 0.2, 0.02);
    // RF64 and BW64: the same sound as the RIFF file they came from. (Debian's
    // libavformat 5.1 reads a RIFX file's 16-bit samples as little-endian,
    // so its sound is not compared.)
    if (magic != "RIFX") {
      const AudioClip riff = decode_audio(wav, {}, {});
      ASSERT_EQ(a.samples.size(), riff.samples.size());
      EXPECT_EQ(pcm_hash(a), pcm_hash(riff));
    }
    // The LIST chunk's size stated as 0x9200001a bytes.
    Bytes bad = good;
    size_t list = 12;
    while (std::memcmp(bad.data() + list, "LIST", 4) != 0) {
      ASSERT_LT(list + 8, bad.size());
      ++list;
    }
    const bool big = magic == "RIFX";
    bad[list + 4 + (big ? 3 : 0)] = 0x1a;
    bad[list + 4 + (big ? 0 : 3)] = 0x92;
    try {
      decode_audio(bad, {}, {});
      ADD_FAILURE() << "decoded a WAV whose LIST chunk runs past the end";
    } catch (const MediaError& e) {
      EXPECT_EQ(e.kind(), MediaErrorKind::Invalid);
      EXPECT_NE(std::string(e.what()).find("'LIST' chunk states 2449473562 bytes"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tern::vision::testing
