#pragma once
// Video input: a clip (bytes of an MP4 / MOV, AVI, Matroska / WebM file) is
// demuxed and decoded with FFmpeg's libraries and sampled by timestamp into
// RGB frames, each then an ordinary Image (hashed, encoded and cached on its
// own, so two clips sharing frames share their work).
//
// Sampling: the targets are t = 0, 1/fps, 2/fps, ... seconds from the first
// frame; each target takes the first decoded frame whose presentation time is
// at or after it (a frame is used once), until max_frames are taken. The
// frames are counted (VideoOptions::reserve) before any is decoded, and each
// is scaled down (VideoOptions::max_side) as it is converted.
//
// Only container formats on a fixed list are opened (no playlists or
// concatenation lists that could name other files), from memory, with one
// decoder thread. Built without FFmpeg (TERN_HAVE_LIBAV unset), every call
// throws MediaError (Unsupported).
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tern/vision/image.h"
#include "tern/vision/media_source.h"

namespace tern::vision {

struct VideoOptions {
  double fps = 1.0;                     // samples per second of video, > 0
  int max_frames = 32;                  // at most this many frames, >= 1
  int64_t max_decoded_frames = 20'000;  // decoding stops here (a long clip costs bounded time)
  // Each frame is scaled as it is converted to RGB so its longer side is at
  // most this (aspect kept; never enlarged): a clip holds at most one
  // full-size decoded frame at a time. 0: frames keep their size.
  int max_side = 0;
  // Asked before any frame is decoded, with the frames the clip can give
  // (max_frames, bounded by the clip's own frame count and duration) and
  // the RGB bytes of each; asked again, (1, bytes), for every frame taken
  // beyond that count (a clip whose header understates it). It may throw to
  // refuse (too many frames for the request, no memory): nothing more is
  // decoded. Empty: not asked.
  std::function<void(int frames, size_t bytes_each)> reserve{};
};

struct VideoFrames {
  std::vector<Image> frames;
  std::vector<double> timestamps_s;  // each frame's presentation time, from the first frame
};

bool video_supported();  // built with FFmpeg's libraries

// Decodes and samples a clip held in memory; the frames obey the policy's
// pixel limit. Throws MediaError: Invalid for data that is not a video, is
// corrupt or truncated, or has no frames; TooLarge for frames over the pixel
// limit; Unsupported without FFmpeg or for an unlisted container.
VideoFrames decode_video(std::span<const uint8_t> bytes, const VideoOptions& opts,
                         const MediaPolicy& policy);

// read_media_bytes (data:, file, remote under the policy) + decode_video.
VideoFrames load_video_url(const std::string& url, const VideoOptions& opts,
                           const MediaPolicy& policy);

}  // namespace tern::vision
