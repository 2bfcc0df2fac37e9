#include "tern/vision/video.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#ifdef TERN_HAVE_LIBAV
#include "av_input.h"
extern "C" {
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}
#endif

namespace tern::vision {
namespace {

[[noreturn]] void fail(MediaErrorKind kind, const std::string& what) {
  throw MediaError(kind, "video: " + what);
}

void check_options(const VideoOptions& o) {
  if (!(o.fps > 0) || o.fps > 1000) fail(MediaErrorKind::Invalid, "fps must be in (0, 1000]");
  if (o.max_frames < 1) fail(MediaErrorKind::Invalid, "max_frames must be at least 1");
}

#ifdef TERN_HAVE_LIBAV

using detail::AvInput;

// Containers a clip may be in. Not hls, concat, image2 & co.: those read
// other files or URLs named inside the data.
constexpr const char* kFormats = "mov,mp4,m4a,3gp,3g2,mj2,avi,matroska,webm";

struct SwsFree {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

// One open clip: demuxer, the best video stream and its decoder.
class Clip {
 public:
  Clip(std::span<const uint8_t> bytes, const MediaPolicy& policy)
      : in_(bytes, "video", "a video", kFormats, AVMEDIA_TYPE_VIDEO, policy.max_pixels) {
    const AVCodecParameters* par = in_.stream()->codecpar;
    if (par->width <= 0 || par->height <= 0)
      fail(MediaErrorKind::Invalid, "the video stream has no frame size");
    if (int64_t(par->width) * par->height > policy.max_pixels)
      fail(MediaErrorKind::TooLarge,
           "frames are " + std::to_string(par->width) + "x" + std::to_string(par->height) +
               " pixels, over the limit of " + std::to_string(policy.max_pixels));
  }

  AvInput& input() { return in_; }
  double time_base() const { return av_q2d(in_.stream()->time_base); }
  int width() const { return in_.stream()->codecpar->width; }
  int height() const { return in_.stream()->codecpar->height; }

  // The frames sampling at `fps` can take, from the header's frame count and
  // duration (either may be absent: then max_frames bounds it alone).
  int planned_frames(const VideoOptions& o) const {
    int64_t n = o.max_frames;
    if (in_.stream()->nb_frames > 0) n = std::min<int64_t>(n, in_.stream()->nb_frames);
    const double seconds = in_.header_seconds();
    // Targets 0, 1/fps, ... before the end, plus one for rounding.
    if (seconds > 0 && seconds * o.fps < double(n)) n = int64_t(std::ceil(seconds * o.fps)) + 1;
    return int(std::clamp<int64_t>(n, 1, o.max_frames));
  }

 private:
  AvInput in_;
};

// The RGB size a w x h frame is scaled to: the longer side at most max_side.
struct OutSize {
  int w = 0, h = 0;
  size_t bytes() const { return size_t(w) * size_t(h) * 3; }
};
OutSize out_size(int w, int h, int max_side) {
  if (max_side <= 0 || std::max(w, h) <= max_side) return {w, h};
  const double s = double(max_side) / std::max(w, h);
  return {std::max(1, int(std::lround(w * s))), std::max(1, int(std::lround(h * s)))};
}

// Decoded frames -> sampled RGB Images, each scaled as it is converted (the
// decoder's full-size frame is the only one held).
class Sampler {
 public:
  Sampler(const VideoOptions& o, const MediaPolicy& p, double time_base, int planned,
          size_t bytes_each)
      : opts_(o), policy_(p), time_base_(time_base), reserved_(planned), bytes_each_(bytes_each) {}

  bool full() const { return int(out_.frames.size()) >= opts_.max_frames; }

  void offer(const AVFrame* f) {
    if (++decoded_ > opts_.max_decoded_frames) {
      stop_ = true;
      return;
    }
    int64_t ts = f->best_effort_timestamp;
    if (ts == AV_NOPTS_VALUE) ts = f->pts;
    double t = ts == AV_NOPTS_VALUE ? double(decoded_ - 1) / opts_.fps : double(ts) * time_base_;
    if (!std::isfinite(t)) t = double(decoded_ - 1) / opts_.fps;  // a damaged time base
    if (!have_start_) {
      start_ = t;
      have_start_ = true;
    }
    t -= start_;
    const double eps = 1e-6;
    if (t + eps < next_target_ || full()) return;
    if (int(out_.frames.size()) >= reserved_) {  // the header said fewer: ask for this one
      if (opts_.reserve) opts_.reserve(1, bytes_each_);
      reserved_ += 1;
    }
    out_.frames.push_back(to_rgb(f));
    out_.timestamps_s.push_back(t);
    // The first target after t, computed (a loop of += 1/fps would run t*fps
    // times, forever once t is so large that adding a step changes nothing:
    // a damaged timestamp hung decoding; found by fuzz_video).
    next_target_ = (std::floor((t + eps) * opts_.fps) + 1) / opts_.fps;
  }

  bool stopped() const { return stop_ || full(); }
  VideoFrames take() { return std::move(out_); }

 private:
  Image to_rgb(const AVFrame* f) {
    if (f->width <= 0 || f->height <= 0 || int64_t(f->width) * f->height > policy_.max_pixels)
      fail(MediaErrorKind::TooLarge, "a frame of " + std::to_string(f->width) + "x" +
                                         std::to_string(f->height) +
                                         " pixels is empty or over the pixel limit");
    const OutSize out = out_size(f->width, f->height, opts_.max_side);
    if (out.bytes() > bytes_each_)
      fail(MediaErrorKind::Invalid, "the frame size changes inside the clip (a frame of " +
                                        std::to_string(f->width) + "x" + std::to_string(f->height) +
                                        " pixels)");
    // SWS_AREA when shrinking: every source pixel counts, no aliasing.
    const int flags = out.w < f->width ? SWS_AREA : SWS_BILINEAR;
    sws_.reset(sws_getCachedContext(sws_.release(), f->width, f->height, AVPixelFormat(f->format),
                                    out.w, out.h, AV_PIX_FMT_RGB24, flags, nullptr, nullptr,
                                    nullptr));
    if (!sws_) fail(MediaErrorKind::Unsupported, "cannot convert this pixel format to RGB");
    // Into a padded scratch frame (rows 64-byte aligned, one spare row):
    // swscale's vector writers may store past a row's last pixel, so its
    // output never goes straight into the image's exact-size buffer.
    const size_t row = size_t(out.w) * 3;
    const size_t pitch = (row + 63) / 64 * 64 + 64;
    scratch_.resize(pitch * (size_t(out.h) + 1));
    uint8_t* dst[4] = {scratch_.data(), nullptr, nullptr, nullptr};
    int stride[4] = {int(pitch), 0, 0, 0};
    if (sws_scale(sws_.get(), f->data, f->linesize, 0, f->height, dst, stride) != out.h)
      fail(MediaErrorKind::Invalid, "frame conversion to RGB failed");
    Image img;
    img.width = out.w;
    img.height = out.h;
    img.rgb.resize(out.bytes());
    for (size_t y = 0; y < size_t(out.h); ++y)
      std::memcpy(img.rgb.data() + y * row, scratch_.data() + y * pitch, row);
    return img;
  }

  const VideoOptions& opts_;
  const MediaPolicy& policy_;
  double time_base_;
  VideoFrames out_;
  std::unique_ptr<SwsContext, SwsFree> sws_;
  std::vector<uint8_t> scratch_;  // one converted frame, padded (see to_rgb)
  int64_t decoded_ = 0;
  int reserved_;       // frames the caller has made room for
  size_t bytes_each_;  // RGB bytes of each (the header's frame size, scaled)
  double start_ = 0, next_target_ = 0;
  bool have_start_ = false, stop_ = false;
};

#endif  // TERN_HAVE_LIBAV

}  // namespace

bool video_supported() {
#ifdef TERN_HAVE_LIBAV
  return true;
#else
  return false;
#endif
}

VideoFrames decode_video(std::span<const uint8_t> bytes, const VideoOptions& opts,
                         const MediaPolicy& policy) {
  check_options(opts);
#ifndef TERN_HAVE_LIBAV
  (void)bytes;
  (void)policy;
  fail(MediaErrorKind::Unsupported, "this build of tern has no video support (FFmpeg libraries)");
#else
  if (bytes.empty()) fail(MediaErrorKind::Invalid, "empty data (0 bytes)");
  if (bytes.size() > policy.max_bytes)
    fail(MediaErrorKind::TooLarge, "the clip is " + std::to_string(bytes.size()) +
                                       " bytes, over the limit of " +
                                       std::to_string(policy.max_bytes));
  Clip clip(bytes, policy);
  // Count first: nothing is decoded before the caller agrees to the frames.
  const int planned = clip.planned_frames(opts);
  const size_t bytes_each = out_size(clip.width(), clip.height(), opts.max_side).bytes();
  if (opts.reserve) opts.reserve(planned, bytes_each);
  Sampler sampler(opts, policy, clip.time_base(), planned, bytes_each);
  clip.input().decode([&](const AVFrame* f) {
    sampler.offer(f);
    return !sampler.stopped();
  });
  VideoFrames out = sampler.take();
  if (out.frames.empty()) fail(MediaErrorKind::Invalid, "the clip has no decodable frames");
  return out;
#endif
}

VideoFrames load_video_url(const std::string& url, const VideoOptions& opts,
                           const MediaPolicy& policy) {
  check_options(opts);
  const std::vector<uint8_t> bytes = read_media_bytes(url, policy);
  return decode_video(bytes, opts, policy);
}

}  // namespace tern::vision
