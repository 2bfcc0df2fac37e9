#pragma once
// The media flags of `tern serve` (see media_parts.h for what they govern).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tern {
class MemoryBudget;
}

namespace tern::server {

struct MediaOptions {
  std::string mmproj;     // --mmproj: the vision projector and/or audio encoder ("" : text only)
  std::string media_dir;  // --media-dir ("" : local paths refused)
  bool allow_remote = false;  // --allow-remote-media
  // --allow-media-hosts: names and addresses exempt from the filter that
  // keeps remote fetches off loopback, private and link-local addresses.
  std::vector<std::string> allow_hosts;
  int64_t max_image_pixels = 32'000'000;      // --max-image-pixels (also per video frame)
  size_t max_media_bytes = size_t(20) << 20;  // --max-media-mb: encoded bytes per item
  size_t cache_bytes = size_t(256) << 20;     // --mm-cache-mb: embedding cache in DRAM
  std::string cache_dir;                      // --mm-cache-dir: its flash tier ("" : none)
  size_t cache_dir_bytes = size_t(1) << 30;   // flash tier budget
  MemoryBudget* budget = nullptr;             // --mem-budget-mb: the cache charges its DRAM here
  int remote_timeout_ms = 10'000;
  int max_redirects = 3;
  int max_fetches = 32;            // remote fetches in flight in all
  int max_fetches_per_client = 4;  // ... for one client address (the rest wait)
  double default_fps = 1.0;        // video sampling when the request gives none
  int default_max_frames = 32;
  int max_items = 64;              // images + video frames per request
  double max_audio_seconds = 300;  // --max-audio-seconds: the longest clip accepted
};

}  // namespace tern::server
