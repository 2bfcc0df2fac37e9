#pragma once
// What the video and audio decoders share of FFmpeg's libraries: a clip held
// in memory, opened by a demuxer from a fixed list of container formats
// (none that reads other files or URLs named inside the data), the best
// stream of one kind and its decoder (one thread), and the read / decode
// loop that hands each decoded frame on. Errors are MediaErrors whose text
// starts with the media's noun ("video: ...", "audio: ..."). Private to
// src/vision; only built with FFmpeg (TERN_HAVE_LIBAV).
#ifdef TERN_HAVE_LIBAV
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "tern/vision/media_source.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

namespace tern::vision::detail {

std::string av_text(int err);  // FFmpeg's text for an error code

// FFmpeg sizes some buffers from numbers in the file before it checks them
// against the data: Debian's libavformat 59 zero-fills a WAV LIST entry's
// stated size, up to 2 GB, for a 2 KB file. No buffer FFmpeg needs for a
// clip within the limits is larger than one plane of the largest frame
// allowed (max_pixels at 8 bytes a pixel, 64-bit RGBA), so av_malloc is
// capped there (process-wide: av_max_alloc; it only ever grows, to the
// largest policy seen, and never below 64 MiB). Then such a file fails to
// open (ENOMEM) instead of taking the memory.
void cap_av_allocations(int64_t max_pixels);

struct FrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct IoFree {
  void operator()(AVIOContext* io) const;
};
struct FormatFree {
  void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};
struct CodecFree {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};

// The clip's bytes as an AVIOContext (read and seek over a span).
struct MemoryReader {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  static int read(void* opaque, uint8_t* buf, int n);
  static int64_t seek(void* opaque, int64_t offset, int whence);
};

class AvInput {
 public:
  // noun: "video" or "audio" (error texts); formats: FFmpeg's demuxer names,
  // comma-separated; a_noun: "a video", "an audio clip"; max_pixels: the
  // largest frame the policy lets through (cap_av_allocations).
  AvInput(std::span<const uint8_t> bytes, const char* noun, const char* a_noun, const char* formats,
          AVMediaType type, int64_t max_pixels);
  AvInput(const AvInput&) = delete;
  AvInput& operator=(const AvInput&) = delete;

  AVFormatContext* fmt() const { return fmt_.get(); }
  AVCodecContext* dec() const { return dec_.get(); }
  const AVStream* stream() const { return fmt_->streams[stream_]; }
  // The stream's duration in seconds from the headers, or -1 when they do not say.
  double header_seconds() const;

  // Reads the stream's packets and hands each decoded frame to on_frame
  // (the frame is unreferenced after it returns) until on_frame returns
  // false or the data ends; then the decoder's delayed frames are flushed to
  // it too. A damaged packet or decoding error is MediaError Invalid.
  void decode(const std::function<bool(const AVFrame*)>& on_frame);

  [[noreturn]] void fail(MediaErrorKind kind, const std::string& what) const;

 private:
  bool drain(AVFrame* frame, const std::function<bool(const AVFrame*)>& on_frame);

  std::string noun_;
  MemoryReader reader_;
  std::unique_ptr<AVIOContext, IoFree> io_;
  std::unique_ptr<AVFormatContext, FormatFree> fmt_;
  std::unique_ptr<AVCodecContext, CodecFree> dec_;
  int stream_ = -1;
};

}  // namespace tern::vision::detail
#endif  // TERN_HAVE_LIBAV
