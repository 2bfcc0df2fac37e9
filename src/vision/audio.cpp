#include "tern/vision/audio.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#ifdef TERN_HAVE_LIBAV
#include "av_input.h"
extern "C" {
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>
}
#endif

namespace tern::vision {
namespace {

[[noreturn]] void fail(MediaErrorKind kind, const std::string& what) {
  throw MediaError(kind, "audio: " + what);
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

#ifdef TERN_HAVE_LIBAV

// Containers a clip may be in (FFmpeg's demuxer names).
constexpr const char* kFormats = "wav,mp3,flac,ogg";

struct SwrFree {
  void operator()(SwrContext* s) const { swr_free(&s); }
};

// Decoded frames -> mono float samples at the target rate: each frame is
// resampled with its channels kept (planar float), then the channels are
// averaged.
class Resampler {
 public:
  Resampler(const AVCodecContext* dec, const AudioOptions& o, size_t max_samples)
      : rate_(o.sample_rate), max_(max_samples) {
    AVChannelLayout in{};
    if (dec->ch_layout.nb_channels <= 0)
      fail(MediaErrorKind::Invalid, "the stream has no channels");
    if (dec->ch_layout.nb_channels > 64) fail(MediaErrorKind::Invalid, "too many channels");
    if (dec->sample_rate < kMinRate || dec->sample_rate > kMaxRate)
      fail(MediaErrorKind::Invalid, "the sample rate, " + std::to_string(dec->sample_rate) +
                                        " Hz, is outside [" + std::to_string(kMinRate) + ", " +
                                        std::to_string(kMaxRate) + "]");
    if (dec->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC)
      av_channel_layout_default(&in, dec->ch_layout.nb_channels);
    else if (av_channel_layout_copy(&in, &dec->ch_layout) < 0)
      throw std::bad_alloc();
    channels_ = in.nb_channels;
    in_rate_ = dec->sample_rate;
    in_format_ = dec->sample_fmt;
    bytes_per_sample_ = av_get_bytes_per_sample(dec->sample_fmt);
    planar_ = av_sample_fmt_is_planar(dec->sample_fmt) != 0;
    if (bytes_per_sample_ <= 0)
      fail(MediaErrorKind::Unsupported, "cannot convert this sample format");
    slice_ = int(std::max<int64_t>(1, int64_t(kSliceOut) * in_rate_ / rate_));
    SwrContext* s = nullptr;
    const int err = swr_alloc_set_opts2(&s, &in, AV_SAMPLE_FMT_FLTP, rate_, &in, dec->sample_fmt,
                                        dec->sample_rate, 0, nullptr);
    av_channel_layout_uninit(&in);
    swr_.reset(s);
    if (err < 0 || !swr_ || swr_init(swr_.get()) < 0)
      fail(MediaErrorKind::Unsupported, "cannot convert this sample format");
  }

  // False once the clip is over max_samples (decoding can stop). The frame
  // goes in slices of at most slice_ input samples, so that one conversion
  // makes about kSliceOut samples a channel whatever the two rates and the
  // frame's length (a long frame at a low rate would otherwise expand into
  // gigabytes before the length check), and the check runs after each.
  bool push(const AVFrame* f) {
    if (f->sample_rate != in_rate_ || f->format != in_format_ ||
        f->ch_layout.nb_channels != channels_)
      fail(MediaErrorKind::Invalid, "the sample format changes inside the clip");
    in_ptrs_.resize(size_t(channels_));
    const size_t stride = size_t(bytes_per_sample_) * size_t(planar_ ? 1 : channels_);
    for (int at = 0; at < f->nb_samples; at += slice_) {
      for (int c = 0; c < channels_; ++c)
        in_ptrs_[size_t(c)] = f->extended_data[planar_ ? c : 0] + size_t(at) * stride;
      convert(in_ptrs_.data(), std::min(slice_, f->nb_samples - at));
      if (out_.size() > max_) return false;
    }
    return true;
  }

  std::vector<float> finish() {
    convert(nullptr, 0);  // the resampler's delayed samples
    return std::move(out_);
  }

 private:
  void convert(const uint8_t** in, int n) {
    const int room = swr_get_out_samples(swr_.get(), n);
    if (room < 0) fail(MediaErrorKind::Invalid, "resampling failed");
    if (room == 0) return;
    planes_.resize(size_t(channels_) * size_t(room));
    ptrs_.resize(size_t(channels_));
    for (int c = 0; c < channels_; ++c)
      ptrs_[size_t(c)] = reinterpret_cast<uint8_t*>(planes_.data() + size_t(c) * size_t(room));
    const int got = swr_convert(swr_.get(), ptrs_.data(), room, in, n);
    if (got < 0) fail(MediaErrorKind::Invalid, "resampling failed");
    const size_t at = out_.size();
    out_.resize(at + size_t(got));
    for (int i = 0; i < got; ++i) {
      double sum = 0;
      for (int c = 0; c < channels_; ++c) sum += planes_[size_t(c) * size_t(room) + size_t(i)];
      out_[at + size_t(i)] = float(sum / channels_);
    }
  }

  static constexpr int kMinRate = 1000, kMaxRate = 768000;
  static constexpr int kSliceOut = 4096;

  std::unique_ptr<SwrContext, SwrFree> swr_;
  int rate_, channels_ = 0, in_rate_ = 0, in_format_ = -1;
  int bytes_per_sample_ = 0, slice_ = 1;
  bool planar_ = false;
  size_t max_;
  std::vector<float> planes_;
  std::vector<uint8_t*> ptrs_;
  std::vector<const uint8_t*> in_ptrs_;
  std::vector<float> out_;
};

// A WAVE file's chunks, before FFmpeg reads them: each one other than the
// samples must fit in the bytes there are ("data" may state 0, 0xffffffff or
// more than follows, as streaming writers and RF64 / BW64 files, whose real
// data size is in their ds64 chunk, leave it: the samples run to the end).
// FFmpeg's wav demuxer reads RIFF, big-endian RIFX, RF64 and BW64 files and
// takes every other chunk's 32-bit size as it stands; it allocates what a
// LIST chunk states before reading it (see detail::cap_av_allocations): a
// 2 KB file that says 250 MB is refused here.
void check_wav_chunks(std::span<const uint8_t> b) {
  if (b.size() < 12 || std::memcmp(b.data() + 8, "WAVE", 4) != 0) return;
  const bool big_endian = std::memcmp(b.data(), "RIFX", 4) == 0;
  if (!big_endian && std::memcmp(b.data(), "RIFF", 4) != 0 &&
      std::memcmp(b.data(), "RF64", 4) != 0 && std::memcmp(b.data(), "BW64", 4) != 0)
    return;  // not a WAVE file: the demuxers decide
  auto size32 = [&](size_t at) {
    const uint32_t b0 = b[at], b1 = b[at + 1], b2 = b[at + 2], b3 = b[at + 3];
    return big_endian ? b0 << 24 | b1 << 16 | b2 << 8 | b3 : b0 | b1 << 8 | b2 << 16 | b3 << 24;
  };
  for (size_t at = 12; at + 8 <= b.size();) {
    const uint64_t size = size32(at + 4), left = b.size() - (at + 8);
    const bool data = std::memcmp(b.data() + at, "data", 4) == 0;
    if (data && (size == 0 || size > left)) return;  // the samples run to the end
    if (size > left) {
      std::string id;
      for (size_t i = 0; i < 4; ++i) {
        const char c = char(b[at + i]);
        id += c >= 0x20 && c < 0x7f ? c : '?';
      }
      fail(MediaErrorKind::Invalid, "corrupt WAV: its '" + id + "' chunk states " +
                                        std::to_string(size) + " bytes, and " +
                                        std::to_string(left) + " follow it");
    }
    at += 8 + size + (size & 1);  // chunks are padded to an even size
  }
}

#endif  // TERN_HAVE_LIBAV

}  // namespace

bool audio_supported() {
#ifdef TERN_HAVE_LIBAV
  return true;
#else
  return false;
#endif
}

AudioClip decode_audio(std::span<const uint8_t> bytes, const AudioOptions& opts,
                       const MediaPolicy& policy) {
  if (opts.sample_rate < 1000 || opts.sample_rate > 192000)
    fail(MediaErrorKind::Invalid, "sample_rate must be in [1000, 192000]");
  if (!(opts.max_seconds > 0)) fail(MediaErrorKind::Invalid, "max_seconds must be positive");
#ifndef TERN_HAVE_LIBAV
  (void)bytes;
  (void)policy;
  fail(MediaErrorKind::Unsupported, "this build of tern has no audio support (FFmpeg libraries)");
#else
  if (bytes.empty()) fail(MediaErrorKind::Invalid, "empty data (0 bytes)");
  if (bytes.size() > policy.max_bytes)
    fail(MediaErrorKind::TooLarge, "the clip is " + std::to_string(bytes.size()) +
                                       " bytes, over the limit of " +
                                       std::to_string(policy.max_bytes));
  check_wav_chunks(bytes);
  detail::AvInput in(bytes, "audio", "an audio clip", kFormats, AVMEDIA_TYPE_AUDIO,
                     policy.max_pixels);
  const double stated = in.header_seconds();
  if (stated > opts.max_seconds)
    fail(MediaErrorKind::TooLarge, "the clip is " + seconds_text(stated) +
                                       " s long, over the limit of " +
                                       seconds_text(opts.max_seconds) + " s");
  const size_t max_samples = size_t(std::ceil(opts.max_seconds * opts.sample_rate));
  Resampler rs(in.dec(), opts, max_samples);
  bool over = false;
  in.decode([&](const AVFrame* f) {
    over = !rs.push(f);
    return !over;
  });
  if (over)
    fail(MediaErrorKind::TooLarge, "the clip is longer than the limit of " +
                                       seconds_text(opts.max_seconds) +
                                       " s (its header said less)");
  AudioClip clip;
  clip.samples = rs.finish();
  clip.sample_rate = opts.sample_rate;
  if (clip.samples.size() > max_samples)
    fail(MediaErrorKind::TooLarge,
         "the clip is longer than the limit of " + seconds_text(opts.max_seconds) + " s");
  if (clip.samples.empty()) fail(MediaErrorKind::Invalid, "the clip has no decodable samples");
  for (float v : clip.samples)
    if (!std::isfinite(v)) fail(MediaErrorKind::Invalid, "the clip decodes to non-finite samples");
  return clip;
#endif
}

AudioClip load_audio_url(const std::string& url, const AudioOptions& opts,
                         const MediaPolicy& policy) {
  const std::vector<uint8_t> bytes = read_media_bytes(url, policy);
  return decode_audio(bytes, opts, policy);
}

Sha256Digest pcm_hash(const AudioClip& clip) {
  // Little-endian bytes on any host: the digest names the sound, not the machine.
  Sha256 h;
  const uint32_t rate = uint32_t(clip.sample_rate);
  const uint8_t le[4] = {uint8_t(rate), uint8_t(rate >> 8), uint8_t(rate >> 16),
                         uint8_t(rate >> 24)};
  h.update(le, 4);
  if constexpr (std::endian::native == std::endian::little) {
    h.update(clip.samples.data(), clip.samples.size() * sizeof(float));
  } else {
    for (float v : clip.samples) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      const uint8_t b[4] = {uint8_t(u), uint8_t(u >> 8), uint8_t(u >> 16), uint8_t(u >> 24)};
      h.update(b, 4);
    }
  }
  return h.finish();
}

}  // namespace tern::vision
