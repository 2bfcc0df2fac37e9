#include "tern/vision/video.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <random>

#include "media_test_util.h"

#ifdef TERN_HAVE_LIBAV
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>
}
#endif

namespace tern::vision::testing {
namespace {

#ifdef TERN_HAVE_LIBAV

// Frame k of a generated clip is one flat colour: R = 10 + 20 k, so a decoded
// frame tells which source frame it was even through lossy compression.
constexpr int kW = 64, kH = 48;
int frame_index(const Image& img) {
  double r = 0;
  for (size_t i = 0; i < img.rgb.size(); i += 3) r += img.rgb[i];
  r /= double(img.width) * img.height;
  return int(std::lround((r - 10) / 20));
}

struct Codec {
  const char* container;  // muxer name
  const char* ext;
  AVCodecID codec;
  AVPixelFormat pix;
};
const Codec kMjpegAvi{"avi", "avi", AV_CODEC_ID_MJPEG, AV_PIX_FMT_YUVJ420P};
const Codec kMpeg4Mp4{"mp4", "mp4", AV_CODEC_ID_MPEG4, AV_PIX_FMT_YUV420P};

// Encodes `n_frames` frames at `fps` with libavcodec into a file and returns
// its bytes. n_frames = 0 writes a header and trailer only.
Bytes make_clip(const Codec& c, int n_frames, int fps) {
  TempDir tmp;
  const std::string path = (tmp.path() / (std::string("clip.") + c.ext)).string();
  AVFormatContext* oc = nullptr;
  EXPECT_GE(avformat_alloc_output_context2(&oc, nullptr, c.container, path.c_str()), 0);
  const AVCodec* codec = avcodec_find_encoder(c.codec);
  EXPECT_NE(codec, nullptr);
  AVStream* st = avformat_new_stream(oc, nullptr);
  AVCodecContext* enc = avcodec_alloc_context3(codec);
  enc->width = kW;
  enc->height = kH;
  enc->pix_fmt = c.pix;
  enc->time_base = AVRational{1, fps};
  enc->framerate = AVRational{fps, 1};
  enc->gop_size = 1;
  enc->max_b_frames = 0;
  enc->bit_rate = 2'000'000;
  if (oc->oformat->flags & AVFMT_GLOBALHEADER) enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  EXPECT_GE(avcodec_open2(enc, codec, nullptr), 0);
  avcodec_parameters_from_context(st->codecpar, enc);
  st->time_base = enc->time_base;
  EXPECT_GE(avio_open(&oc->pb, path.c_str(), AVIO_FLAG_WRITE), 0);
  EXPECT_GE(avformat_write_header(oc, nullptr), 0);

  SwsContext* sws = sws_getContext(kW, kH, AV_PIX_FMT_RGB24, kW, kH, c.pix, SWS_BILINEAR, nullptr,
                                   nullptr, nullptr);
  AVFrame* frame = av_frame_alloc();
  frame->format = c.pix;
  frame->width = kW;
  frame->height = kH;
  av_frame_get_buffer(frame, 0);
  AVPacket* pkt = av_packet_alloc();
  auto write_ready = [&] {
    while (avcodec_receive_packet(enc, pkt) == 0) {
      pkt->duration = 1;  // one frame: MP4's edit list would cut a 0-length last frame
      av_packet_rescale_ts(pkt, enc->time_base, st->time_base);
      pkt->stream_index = st->index;
      av_interleaved_write_frame(oc, pkt);
    }
  };
  std::vector<uint8_t> rgb(size_t(kW) * kH * 3);
  for (int k = 0; k < n_frames; ++k) {
    for (size_t i = 0; i < rgb.size(); i += 3) {
      rgb[i] = uint8_t(10 + 20 * k);
      rgb[i + 1] = 128;
      rgb[i + 2] = uint8_t(250 - 20 * k);
    }
    av_frame_make_writable(frame);
    const uint8_t* src[1] = {rgb.data()};
    const int stride[1] = {kW * 3};
    sws_scale(sws, src, stride, 0, kH, frame->data, frame->linesize);
    frame->pts = k;
    EXPECT_GE(avcodec_send_frame(enc, frame), 0);
    write_ready();
  }
  avcodec_send_frame(enc, nullptr);
  write_ready();
  av_write_trailer(oc);
  avio_closep(&oc->pb);
  av_packet_free(&pkt);
  av_frame_free(&frame);
  sws_freeContext(sws);
  avcodec_free_context(&enc);
  avformat_free_context(oc);
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

std::vector<int> indices(const VideoFrames& v) {
  std::vector<int> out;
  for (const Image& img : v.frames) out.push_back(frame_index(img));
  return out;
}

TEST(Video, SamplesByTimestampAtTheRequestedFps) {
  for (const Codec& c : {kMjpegAvi, kMpeg4Mp4}) {
    const Bytes clip = make_clip(c, 10, 10);  // 1 s at 10 fps
    ASSERT_GT(clip.size(), 0u) << c.container;
    const VideoFrames all = decode_video(clip, {.fps = 100, .max_frames = 100}, {});
    EXPECT_EQ(indices(all), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})) << c.container;
    ASSERT_EQ(all.frames[0].width, kW);
    ASSERT_EQ(all.frames[0].height, kH);
    EXPECT_NEAR(all.timestamps_s[3], 0.3, 1e-6) << c.container;

    const VideoFrames two = decode_video(clip, {.fps = 2, .max_frames = 100}, {});
    EXPECT_EQ(indices(two), (std::vector<int>{0, 5})) << c.container;
    const VideoFrames three = decode_video(clip, {.fps = 4, .max_frames = 3}, {});
    EXPECT_EQ(indices(three), (std::vector<int>{0, 3, 5})) << c.container;  // t = 0, .25->.3, .5
  }
}

TEST(Video, FramesSharedBetweenClipsHashTheSame) {
  const Bytes a = make_clip(kMjpegAvi, 10, 10);
  const Bytes b = make_clip(kMjpegAvi, 4, 10);  // the first 4 frames of a
  const VideoFrames fa = decode_video(a, {.fps = 10, .max_frames = 10}, {});
  const VideoFrames fb = decode_video(b, {.fps = 10, .max_frames = 10}, {});
  ASSERT_EQ(fb.frames.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(pixel_hash(fa.frames[i]), pixel_hash(fb.frames[i]));
  EXPECT_NE(pixel_hash(fa.frames[0]), pixel_hash(fa.frames[1]));
}

TEST(Video, ZeroFrameCorruptAndTruncatedClipsAreRefused) {
  std::string msg;
  for (const Codec& c : {kMjpegAvi, kMpeg4Mp4}) {
    const Bytes empty = make_clip(c, 0, 10);
    EXPECT_EQ(error_kind([&] { decode_video(empty, {}, {}); }, &msg), MediaErrorKind::Invalid)
        << c.container;
    const Bytes clip = make_clip(c, 10, 10);
    const Bytes cut(clip.begin(), clip.begin() + long(clip.size() * 6 / 10));
    EXPECT_EQ(error_kind([&] { decode_video(cut, {.fps = 100, .max_frames = 100}, {}); }, &msg),
              MediaErrorKind::Invalid)
        << c.container;
  }
  Bytes noise(4096);
  std::mt19937 rng(5);
  for (auto& b : noise) b = uint8_t(rng());
  EXPECT_EQ(error_kind([&] { decode_video(noise, {}, {}); }, &msg), MediaErrorKind::Invalid);
  EXPECT_EQ(error_kind([&] { decode_video(encode_png(test_pattern(8, 8)), {}, {}); }, &msg),
            MediaErrorKind::Invalid);
  EXPECT_EQ(error_kind([&] { decode_video(Bytes{}, {}, {}); }), MediaErrorKind::Invalid);
}

TEST(Video, LimitsAndOptions) {
  const Bytes clip = make_clip(kMjpegAvi, 3, 10);
  MediaPolicy p;
  p.max_pixels = kW * kH - 1;
  EXPECT_EQ(error_kind([&] { decode_video(clip, {}, p); }), MediaErrorKind::TooLarge);
  p = {};
  p.max_bytes = clip.size() - 1;
  EXPECT_EQ(error_kind([&] { decode_video(clip, {}, p); }), MediaErrorKind::TooLarge);
  EXPECT_EQ(error_kind([&] { decode_video(clip, {.fps = 0}, {}); }), MediaErrorKind::Invalid);
  EXPECT_EQ(error_kind([&] { decode_video(clip, {.fps = 1, .max_frames = 0}, {}); }),
            MediaErrorKind::Invalid);
  // Through a data: URL and a path under the media directory.
  TempDir tmp;
  write_file(tmp.path() / "c.avi", clip);
  MediaPolicy local;
  local.media_dir = tmp.path().string();
  EXPECT_EQ(load_video_url(data_url(clip, "video/avi"), {.fps = 10}, {}).frames.size(), 3u);
  EXPECT_EQ(load_video_url("c.avi", {.fps = 10}, local).frames.size(), 3u);
  EXPECT_EQ(error_kind([&] { load_video_url("c.avi", {}, {}); }), MediaErrorKind::Forbidden);
}

// The frames are counted (reserve) before any is decoded, and each is scaled
// as it is converted: the longer side at most max_side, aspect kept.
TEST(Video, FramesAreCountedBeforeDecodingAndScaledAsDecoded) {
  const Bytes clip = make_clip(kMjpegAvi, 10, 10);  // 1 s at 10 fps, 64x48
  std::vector<std::pair<int, size_t>> asked;
  VideoOptions o{.fps = 100, .max_frames = 100, .max_side = 32};
  o.reserve = [&](int n, size_t each) { asked.push_back({n, each}); };
  const VideoFrames v = decode_video(clip, o, {});
  ASSERT_EQ(v.frames.size(), 10u);
  // The header's 10 frames, once, before decoding (no frame beyond them).
  EXPECT_EQ(asked, (std::vector<std::pair<int, size_t>>{{10, 32 * 24 * 3}}));
  EXPECT_EQ(v.frames[0].width, 32);
  EXPECT_EQ(v.frames[0].height, 24);
  EXPECT_EQ(indices(v), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // max_frames and fps bound the count too: 1 s at 2 fps is at most 3 targets.
  asked.clear();
  o.fps = 2;
  o.max_frames = 2;
  EXPECT_EQ(decode_video(clip, o, {}).frames.size(), 2u);
  EXPECT_EQ(asked, (std::vector<std::pair<int, size_t>>{{2, 32 * 24 * 3}}));
  // A refusal from reserve stops everything before a frame is decoded.
  o.reserve = [](int, size_t) { throw std::runtime_error("no room"); };
  EXPECT_THROW(decode_video(clip, o, {}), std::runtime_error);
  // Frames never grow: a side above the frame's keeps it.
  const VideoFrames same = decode_video(clip, {.fps = 10, .max_frames = 1, .max_side = 1000}, {});
  EXPECT_EQ(same.frames[0].width, kW);
}

// Random byte flips (and cuts) must end in frames or a MediaError, never a
// crash, hang or other exception (run under build-asan to catch memory errors).
TEST(Video, RandomDamageNeverCrashes) {
  std::mt19937 rng(11);
  for (const Codec& c : {kMjpegAvi, kMpeg4Mp4}) {
    const Bytes clip = make_clip(c, 6, 10);
    int refused = 0, decoded = 0;
    for (int iter = 0; iter < 150; ++iter) {
      Bytes b = clip;
      const int flips = 1 + int(rng() % 16);
      for (int k = 0; k < flips; ++k) b[rng() % b.size()] ^= uint8_t(1 + rng() % 255);
      if (iter % 5 == 0) b.resize(1 + rng() % b.size());
      try {
        const VideoFrames v = decode_video(b, {.fps = 30, .max_frames = 8}, {});
        EXPECT_FALSE(v.frames.empty());
        for (const Image& img : v.frames)
          EXPECT_EQ(img.rgb.size(), size_t(img.width) * img.height * 3);
        ++decoded;
      } catch (const MediaError&) {
        ++refused;
      }
    }
    EXPECT_EQ(refused + decoded, 150) << c.container;
  }
}

#else

TEST(Video, RefusedWithoutFfmpeg) {
  EXPECT_FALSE(video_supported());
  EXPECT_EQ(error_kind([&] { decode_video(Bytes{1, 2, 3}, {}, {}); }), MediaErrorKind::Unsupported);
}

#endif

}  // namespace
}  // namespace tern::vision::testing
