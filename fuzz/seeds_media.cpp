// Seeds for fuzz_image (one small file per format tern decodes) and
// fuzz_video (tiny clips in each container family, encoded with libavcodec).
#include <webp/encode.h>

#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "seeds.h"
#include "tern/core/error.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb_image_write.h>

#ifdef TERN_HAVE_LIBAV
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
}

#include "audio_encode.h"
#endif

namespace tern::fuzz {
namespace {

// A (w, h) RGB gradient.
std::vector<uint8_t> pattern(int w, int h) {
  std::vector<uint8_t> px(size_t(w) * size_t(h) * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 29 + (i / 3) * 7);
  return px;
}

void collect(void* ctx, void* data, int n) {
  auto* out = static_cast<std::vector<uint8_t>*>(ctx);
  out->insert(out->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + n);
}

// A 1x1 GIF: two-colour global table, LZW codes clear, 0, end.
constexpr uint8_t kGif[] = {'G', 'I', 'F', '8', '9',  'a',  1,    0,    1,    0, 0x80, 0,
                            0,   0,   0,   0,   0xff, 0xff, 0xff, ',',  0,    0, 0,    0,
                            1,   0,   1,   0,   0,    2,    2,    0x44, 0x01, 0, ';'};

#ifdef TERN_HAVE_LIBAV
// Encodes 3 frames of 16x16 (a colour ramp) with `codec` into `container`.
std::vector<uint8_t> clip(const char* container, AVCodecID codec_id, AVPixelFormat pix,
                          const std::string& path) {
  constexpr int kSide = 16, kFrames = 3, kFps = 4;
  AVFormatContext* oc = nullptr;
  if (avformat_alloc_output_context2(&oc, nullptr, container, path.c_str()) < 0)
    throw IoError(std::string("no muxer ") + container);
  const AVCodec* codec = avcodec_find_encoder(codec_id);
  if (!codec) throw IoError("no encoder for " + path);
  AVStream* st = avformat_new_stream(oc, nullptr);
  AVCodecContext* enc = avcodec_alloc_context3(codec);
  enc->width = enc->height = kSide;
  enc->pix_fmt = pix;
  enc->time_base = AVRational{1, kFps};
  enc->framerate = AVRational{kFps, 1};
  enc->gop_size = 1;
  if (oc->oformat->flags & AVFMT_GLOBALHEADER) enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  if (avcodec_open2(enc, codec, nullptr) < 0) throw IoError("cannot open the encoder");
  avcodec_parameters_from_context(st->codecpar, enc);
  st->time_base = enc->time_base;
  if (avio_open(&oc->pb, path.c_str(), AVIO_FLAG_WRITE) < 0 ||
      avformat_write_header(oc, nullptr) < 0)
    throw IoError("cannot write " + path);
  AVFrame* frame = av_frame_alloc();
  frame->format = pix;
  frame->width = frame->height = kSide;
  av_frame_get_buffer(frame, 0);
  AVPacket* pkt = av_packet_alloc();
  auto flush = [&] {
    while (avcodec_receive_packet(enc, pkt) == 0) {
      pkt->duration = 1;
      av_packet_rescale_ts(pkt, enc->time_base, st->time_base);
      pkt->stream_index = st->index;
      av_interleaved_write_frame(oc, pkt);
    }
  };
  for (int k = 0; k < kFrames; ++k) {
    av_frame_make_writable(frame);
    for (int p = 0; p < 3; ++p) {  // Y, then flat chroma
      const int rows = p == 0 ? kSide : kSide / 2;
      for (int y = 0; y < rows; ++y)
        std::memset(frame->data[p] + y * frame->linesize[p], p == 0 ? 40 + 60 * k : 128,
                    size_t(p == 0 ? kSide : kSide / 2));
    }
    frame->pts = k;
    avcodec_send_frame(enc, frame);
    flush();
  }
  avcodec_send_frame(enc, nullptr);
  flush();
  av_write_trailer(oc);
  avio_closep(&oc->pb);
  av_packet_free(&pkt);
  av_frame_free(&frame);
  avcodec_free_context(&enc);
  avformat_free_context(oc);
  return read_bytes(path);
}
#endif

}  // namespace

void image_seeds(const std::string& dir) {
  std::vector<uint8_t> out;
  const auto px = pattern(4, 3);
  stbi_write_png_to_func(collect, &out, 4, 3, 3, px.data(), 4 * 3);
  save_seed(dir, "tiny.png", out);
  out.clear();
  const auto px8 = pattern(8, 8);
  stbi_write_jpg_to_func(collect, &out, 8, 8, 3, px8.data(), 80);
  save_seed(dir, "tiny.jpg", out);
  out.clear();
  stbi_write_bmp_to_func(collect, &out, 4, 3, 3, px.data());
  save_seed(dir, "tiny.bmp", out);
  save_seed(dir, "tiny.gif", std::span<const uint8_t>(kGif, sizeof kGif));
  uint8_t* webp = nullptr;
  size_t n = WebPEncodeRGB(px8.data(), 8, 8, 8 * 3, 75.0f, &webp);
  save_seed(dir, "lossy.webp", std::span<const uint8_t>(webp, n));
  WebPFree(webp);
  n = WebPEncodeLosslessRGB(px.data(), 4, 3, 4 * 3, &webp);
  save_seed(dir, "lossless.webp", std::span<const uint8_t>(webp, n));
  WebPFree(webp);
}

void video_seeds(const std::string& dir) {
#ifdef TERN_HAVE_LIBAV
  const std::string tmp = scratch_dir();
  save_seed(dir, "mjpeg.avi", clip("avi", AV_CODEC_ID_MJPEG, AV_PIX_FMT_YUVJ420P, tmp + "/c.avi"));
  save_seed(dir, "mpeg4.mp4", clip("mp4", AV_CODEC_ID_MPEG4, AV_PIX_FMT_YUV420P, tmp + "/c.mp4"));
  save_seed(dir, "mjpeg.mkv",
            clip("matroska", AV_CODEC_ID_MJPEG, AV_PIX_FMT_YUVJ420P, tmp + "/c.mkv"));
#else
  save_seed(dir, "empty", std::string_view());
#endif
}

// Short clips in each listed container (the unit tests' encoder).
void audio_seeds(const std::string& dir) {
#ifdef TERN_HAVE_LIBAV
  using namespace audio_clips;
  save_seed(dir, "tone.wav", encode(kWav, 0.05));
  save_seed(dir, "stereo44.wav", encode(kWav44, 0.05, 2));
  save_seed(dir, "tone.flac", encode(kFlac, 0.05));
  save_seed(dir, "tone.mp3", encode(kMp3, 0.1));
  save_seed(dir, "tone.opus.ogg", encode(kOpus, 0.1));
  save_seed(dir, "tone.vorbis.ogg", encode(kVorbis, 0.1));
#else
  save_seed(dir, "empty", std::string_view());
#endif
}

}  // namespace tern::fuzz
