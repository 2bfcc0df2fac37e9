#pragma once
// Audio input: a clip (bytes of a WAV, MP3, FLAC or Ogg (Vorbis / Opus)
// file) decoded with FFmpeg's libraries into 16 kHz mono float samples, what
// Whisper-style encoders take (vision/audio_mel.h). Channels are averaged;
// the rate is converted by libswresample.
//
// Limits are decided before anything is decoded: the encoded bytes (the
// policy's max_bytes) and the duration the headers state (max_seconds); a
// clip whose headers understate its length stops decoding at max_seconds
// and is refused then. Only the container formats on a fixed list are
// opened, from memory, with one decoder thread.
//
// A clip's identity is the SHA-256 of its samples (pcm_hash): the same
// sound as WAV and as FLAC is one cache entry. Built without FFmpeg
// (TERN_HAVE_LIBAV unset), every call throws MediaError (Unsupported).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tern/core/sha256.h"
#include "tern/vision/media_source.h"

namespace tern::vision {

struct AudioOptions {
  int sample_rate = 16000;   // of the samples returned
  double max_seconds = 600;  // longer clips are refused (MediaError TooLarge)
};

struct AudioClip {
  std::vector<float> samples;  // mono, in [-1, 1] for ordinary sources
  int sample_rate = 0;
  double seconds() const { return sample_rate > 0 ? double(samples.size()) / sample_rate : 0; }
};

bool audio_supported();  // built with FFmpeg's libraries

// Decodes a clip held in memory. Throws MediaError: Invalid for data that is
// not audio, is corrupt or truncated, or has no samples; TooLarge over the
// byte or duration limit; Unsupported without FFmpeg or for an unlisted
// container.
AudioClip decode_audio(std::span<const uint8_t> bytes, const AudioOptions& opts,
                       const MediaPolicy& policy);

// read_media_bytes (data:, file, remote under the policy) + decode_audio.
AudioClip load_audio_url(const std::string& url, const AudioOptions& opts,
                         const MediaPolicy& policy);

// SHA-256 of the samples (little-endian float32) and their rate.
Sha256Digest pcm_hash(const AudioClip& clip);

}  // namespace tern::vision
