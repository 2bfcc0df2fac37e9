#pragma once
// Test audio clips encoded with libavcodec into memory (WAV, FLAC, MP3, Ogg
// Vorbis / Opus): shared by tern's audio tests (audio_test.cpp) and the
// fuzz seeds (fuzz/seeds_media.cpp). The source is a 440 Hz tone at 0.4 of
// full scale; with two channels the second is at half the first's level.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
}

namespace audio_clips {

struct Format {
  const char* container;
  const char* encoder;  // libavcodec's encoder name
  AVSampleFormat fmt;
  int rate;
};

inline const Format kWav{"wav", "pcm_s16le", AV_SAMPLE_FMT_S16, 16000};
inline const Format kWav44{"wav", "pcm_f32le", AV_SAMPLE_FMT_FLT, 44100};
inline const Format kFlac{"flac", "flac", AV_SAMPLE_FMT_S16, 16000};
inline const Format kMp3{"mp3", "libmp3lame", AV_SAMPLE_FMT_FLTP, 44100};
inline const Format kOpus{"ogg", "libopus", AV_SAMPLE_FMT_FLT, 48000};
inline const Format kVorbis{"ogg", "libvorbis", AV_SAMPLE_FMT_FLTP, 44100};

inline float tone(int i, int rate) {
  return float(0.4 * std::sin(2 * 3.14159265358979323846 * 440.0 * i / rate));
}

// The tone encoded as `f` for `seconds`; empty when libavcodec lacks the
// encoder or a call fails.
// `frame_size` > 0 asks the encoder for frames of that many samples.
inline std::vector<uint8_t> encode(const Format& f, double seconds, int channels = 1,
                                   int frame_size = 0) {
  const AVCodec* codec = avcodec_find_encoder_by_name(f.encoder);
  if (!codec) return {};
  AVFormatContext* oc = nullptr;
  if (avformat_alloc_output_context2(&oc, nullptr, f.container, nullptr) < 0) return {};
  AVStream* st = avformat_new_stream(oc, nullptr);
  AVCodecContext* enc = avcodec_alloc_context3(codec);
  enc->sample_fmt = f.fmt;
  enc->sample_rate = f.rate;
  av_channel_layout_default(&enc->ch_layout, channels);
  enc->time_base = AVRational{1, f.rate};
  enc->bit_rate = 128000;
  if (frame_size > 0) enc->frame_size = frame_size;
  if (oc->oformat->flags & AVFMT_GLOBALHEADER) enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  bool ok = avcodec_open2(enc, codec, nullptr) >= 0 &&
            avcodec_parameters_from_context(st->codecpar, enc) >= 0;
  st->time_base = enc->time_base;
  ok = ok && avio_open_dyn_buf(&oc->pb) >= 0 && avformat_write_header(oc, nullptr) >= 0;
  AVFrame* frame = av_frame_alloc();
  AVPacket* pkt = av_packet_alloc();
  const int per = enc->frame_size > 0 ? enc->frame_size : 1024;
  const int total = int(seconds * f.rate);
  const auto write_ready = [&] {
    while (avcodec_receive_packet(enc, pkt) == 0) {
      av_packet_rescale_ts(pkt, enc->time_base, st->time_base);
      pkt->stream_index = st->index;
      av_interleaved_write_frame(oc, pkt);
    }
  };
  for (int at = 0; ok && at < total; at += per) {
    frame->format = f.fmt;
    frame->sample_rate = f.rate;
    frame->nb_samples = std::min(per, total - at);
    av_channel_layout_copy(&frame->ch_layout, &enc->ch_layout);
    ok = av_frame_get_buffer(frame, 0) >= 0;
    for (int i = 0; ok && i < frame->nb_samples; ++i)
      for (int c = 0; c < channels; ++c) {
        const float v = tone(at + i, f.rate) * (c == 0 ? 1.0f : 0.5f);
        if (f.fmt == AV_SAMPLE_FMT_S16)
          reinterpret_cast<int16_t*>(frame->data[0])[i * channels + c] = int16_t(v * 32767);
        else if (f.fmt == AV_SAMPLE_FMT_FLT)
          reinterpret_cast<float*>(frame->data[0])[i * channels + c] = v;
        else  // planar float
          reinterpret_cast<float*>(frame->data[c])[i] = v;
      }
    frame->pts = at;
    ok = ok && avcodec_send_frame(enc, frame) >= 0;
    av_frame_unref(frame);
    write_ready();
  }
  std::vector<uint8_t> out;
  if (ok) {
    avcodec_send_frame(enc, nullptr);
    write_ready();
    av_write_trailer(oc);
  }
  if (oc->pb) {
    uint8_t* buf = nullptr;
    const int n = avio_close_dyn_buf(oc->pb, &buf);
    oc->pb = nullptr;
    if (ok && n > 0) out.assign(buf, buf + n);
    av_free(buf);
  }
  av_packet_free(&pkt);
  av_frame_free(&frame);
  avcodec_free_context(&enc);
  avformat_free_context(oc);
  return out;
}

}  // namespace audio_clips
