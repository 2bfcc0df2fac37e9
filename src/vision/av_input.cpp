#include "av_input.h"

#ifdef TERN_HAVE_LIBAV
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>

extern "C" {
#include <libavutil/mem.h>
}

namespace tern::vision::detail {

std::string av_text(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof buf);
  return buf;
}

int MemoryReader::read(void* opaque, uint8_t* buf, int n) {
  auto* r = static_cast<MemoryReader*>(opaque);
  const size_t left = r->bytes.size() - r->pos;
  if (left == 0) return AVERROR_EOF;
  const size_t k = std::min(left, size_t(n));
  std::memcpy(buf, r->bytes.data() + r->pos, k);
  r->pos += k;
  return int(k);
}

int64_t MemoryReader::seek(void* opaque, int64_t offset, int whence) {
  auto* r = static_cast<MemoryReader*>(opaque);
  const int64_t size = int64_t(r->bytes.size());
  int64_t to = 0;
  switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE:
      return size;
    case SEEK_SET:
      to = offset;
      break;
    case SEEK_CUR:
      to = int64_t(r->pos) + offset;
      break;
    case SEEK_END:
      to = size + offset;
      break;
    default:
      return AVERROR(EINVAL);
  }
  if (to < 0 || to > size) return AVERROR(EINVAL);
  r->pos = size_t(to);
  return to;
}

void cap_av_allocations(int64_t max_pixels) {
  constexpr int64_t kFloor = int64_t(64) << 20, kSlack = int64_t(16) << 20;
  const int64_t px = std::clamp<int64_t>(max_pixels, 0, int64_t(1) << 40);
  const auto want = size_t(std::max(kFloor, px * 8 + kSlack));
  static std::mutex mu;
  static size_t cap = 0;
  const std::lock_guard<std::mutex> lock(mu);
  if (want <= cap) return;
  cap = want;
  av_max_alloc(cap);
}

void IoFree::operator()(AVIOContext* io) const {
  if (!io) return;
  av_freep(&io->buffer);
  avio_context_free(&io);
}

void AvInput::fail(MediaErrorKind kind, const std::string& what) const {
  throw MediaError(kind, noun_ + ": " + what);
}

AvInput::AvInput(std::span<const uint8_t> bytes, const char* noun, const char* a_noun,
                 const char* formats, AVMediaType type, int64_t max_pixels)
    : noun_(noun), reader_{bytes} {
  av_log_set_level(AV_LOG_QUIET);  // errors reach the caller as MediaError
  cap_av_allocations(max_pixels);
  constexpr int kBuf = 1 << 16;
  auto* buf = static_cast<uint8_t*>(av_malloc(kBuf));
  if (!buf) throw std::bad_alloc();
  io_.reset(avio_alloc_context(buf, kBuf, 0, &reader_, &MemoryReader::read, nullptr,
                               &MemoryReader::seek));
  if (!io_) {
    av_free(buf);
    throw std::bad_alloc();
  }
  AVFormatContext* f = avformat_alloc_context();
  if (!f) throw std::bad_alloc();
  f->pb = io_.get();
  f->flags |= AVFMT_FLAG_CUSTOM_IO;
  AVDictionary* opts = nullptr;
  av_dict_set(&opts, "format_whitelist", formats, 0);
  const int err = avformat_open_input(&f, nullptr, nullptr, &opts);
  av_dict_free(&opts);
  if (err < 0)  // f is freed by avformat_open_input on failure
    fail(MediaErrorKind::Invalid, std::string("not ") + a_noun + " in a supported container (" +
                                      formats + "), or corrupt: " + av_text(err));
  fmt_.reset(f);
  if (avformat_find_stream_info(f, nullptr) < 0)
    fail(MediaErrorKind::Invalid, "corrupt or truncated " + noun_ + " (no stream information)");
  const AVCodec* codec = nullptr;
  stream_ = av_find_best_stream(f, type, -1, -1, &codec, 0);
  if (stream_ < 0 || !codec)
    fail(MediaErrorKind::Invalid, "the file has no decodable " + noun_ + " stream");
  dec_.reset(avcodec_alloc_context3(codec));
  if (!dec_) throw std::bad_alloc();
  if (avcodec_parameters_to_context(dec_.get(), f->streams[stream_]->codecpar) < 0)
    fail(MediaErrorKind::Invalid, "bad " + noun_ + " stream parameters");
  dec_->thread_count = 1;
  if (avcodec_open2(dec_.get(), codec, nullptr) < 0)
    fail(MediaErrorKind::Invalid, "cannot open the " + noun_ + " decoder");
}

double AvInput::header_seconds() const {
  const AVStream* st = stream();
  if (st->duration != AV_NOPTS_VALUE && st->duration > 0)
    return double(st->duration) * av_q2d(st->time_base);
  if (fmt_->duration != AV_NOPTS_VALUE && fmt_->duration > 0)
    return double(fmt_->duration) / AV_TIME_BASE;
  return -1;
}

// Receives every frame the decoder has ready; false once on_frame wants no more.
bool AvInput::drain(AVFrame* frame, const std::function<bool(const AVFrame*)>& on_frame) {
  for (;;) {
    const int err = avcodec_receive_frame(dec_.get(), frame);
    if (err == AVERROR(EAGAIN) || err == AVERROR_EOF) return true;
    if (err < 0) fail(MediaErrorKind::Invalid, "corrupt " + noun_ + " data: " + av_text(err));
    const bool more = on_frame(frame);
    av_frame_unref(frame);
    if (!more) return false;
  }
}

void AvInput::decode(const std::function<bool(const AVFrame*)>& on_frame) {
  struct PacketFree {
    void operator()(AVPacket* p) const { av_packet_free(&p); }
  };
  std::unique_ptr<AVPacket, PacketFree> pkt(av_packet_alloc());
  std::unique_ptr<AVFrame, FrameFree> frame(av_frame_alloc());
  if (!pkt || !frame) throw std::bad_alloc();
  for (;;) {
    const int err = av_read_frame(fmt_.get(), pkt.get());
    if (err == AVERROR_EOF) break;
    if (err < 0)
      fail(MediaErrorKind::Invalid, "corrupt or truncated " + noun_ + ": " + av_text(err));
    const bool ours = pkt->stream_index == stream_;
    const bool corrupt = pkt->flags & AV_PKT_FLAG_CORRUPT;
    if (ours && corrupt) {
      av_packet_unref(pkt.get());
      fail(MediaErrorKind::Invalid, "corrupt or truncated " + noun_ + " (a damaged packet)");
    }
    const int sent = ours ? avcodec_send_packet(dec_.get(), pkt.get()) : 0;
    av_packet_unref(pkt.get());
    if (sent < 0 && sent != AVERROR(EAGAIN))
      fail(MediaErrorKind::Invalid, "corrupt " + noun_ + " data: " + av_text(sent));
    if (ours && !drain(frame.get(), on_frame)) return;
  }
  avcodec_send_packet(dec_.get(), nullptr);  // flush the decoder's delayed frames
  drain(frame.get(), on_frame);
}

}  // namespace tern::vision::detail
#endif  // TERN_HAVE_LIBAV
