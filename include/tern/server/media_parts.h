#pragma once
// Media in chat messages: OpenAI's content parts
//   {"type": "text", "text": ...}
//   {"type": "image_url", "image_url": {"url": ..., "detail": "auto"|"low"|"high"}}
//   {"type": "video_url", "video_url": {"url": ..., "fps": 1, "max_frames": 32}}  (vLLM's shape)
//   {"type": "video", "frames": ["<image url>", ...]}
//   {"type": "input_audio", "input_audio": {"data": base64, "format":
//   "wav"|"mp3"|"flac"|"ogg"|"opus"}}
//   {"type": "audio_url", "audio_url": {"url": ...}}
// parsed into a sequence of text and media items per message (shapes checked,
// errors name the param, e.g. messages[1].content[2].image_url.url), then
// loaded under the server's MediaPolicy (data: URLs, files under --media-dir,
// remote URLs with --allow-remote-media) into decoded frames with their pixel
// hashes, or decoded clips (16 kHz mono, at most --max-audio-seconds, the
// limit checked from the headers before decoding) with their pcm_hash.
// Errors are ApiErrors: a path outside the media directory or a disabled
// source is 403, everything else 400.
//
// MediaService is the server's media state: the policy (with the remote
// fetcher), the embedding cache (--mm-cache-mb, --mm-cache-dir), whether the
// model has a vision projector and an audio encoder, and counters for /metrics.
#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tern/core/memory_budget.h"
#include "tern/core/sha256.h"
#include "tern/server/api_error.h"
#include "tern/server/media_options.h"
#include "tern/server/openai_request.h"
#include "tern/vision/embedding_cache.h"
#include "tern/vision/media_source.h"

namespace tern::server {

// One media part of one message.
struct MediaItem {
  enum class Kind : uint8_t { Image, VideoUrl, VideoFrames, Audio };
  Kind kind = Kind::Image;
  std::string param;  // the part, in its API's terms: "messages[1].content[2]"
  // The field holding its source, in errors about the source:
  // "messages[1].content[2].image_url.url" (chat), "...source" (Anthropic).
  std::string source_param;
  std::vector<std::string> urls;  // one for Image / VideoUrl, the frames' for VideoFrames
  std::string detail = "auto";    // image_url.detail
  double fps = 0;                 // VideoUrl: 0 = the server's default
  int max_frames = 0;             // VideoUrl: 0 = the server's default
  // Filled in by load_media:
  std::vector<vision::Image> frames;  // an image: one
  std::vector<Sha256Digest> hashes;   // pixel_hash of each frame
  std::vector<double> timestamps_s;   // VideoUrl: each frame's time in the clip
  vision::AudioClip audio;            // Audio: the clip (hashes[0] its pcm_hash)
  // The frames' decoded bytes (or the clip's samples), charged to the memory
  // budget (MmPixels) as they were decoded; with_media_markers hands each
  // frame its share.
  MemoryCharge pixels;
};

// A message's content in order: text pieces and media (index into items).
struct ContentPiece {
  std::string text;
  int media = -1;  // >= 0: items[media]
};

struct MessageMedia {
  std::vector<std::vector<ContentPiece>> messages;  // per message; empty for string content
  std::vector<MediaItem> items;
  bool any() const { return !items.empty(); }
};

// Shapes only (no loading): every message's content parts. Throws ApiError.
MessageMedia parse_message_media(const nlohmann::json& body);

// A copy of a chat body whose media parts are text parts holding one media
// marker (engine/media_prompt.h's kMediaMarker) per frame; the frames move to
// `images` in marker order, each holding its pixels' charge until the last
// reference to it goes. m must be the body's loaded MessageMedia.
nlohmann::json with_media_markers(const nlohmann::json& body, MessageMedia& m,
                                  std::vector<std::shared_ptr<const vision::Image>>& images);
// The same with audio parts too: each clip becomes one audio marker
// (kAudioMarker) and moves to `audio`, in marker order. (The form above
// refuses a body with audio.)
nlohmann::json with_media_markers(const nlohmann::json& body, MessageMedia& m,
                                  std::vector<std::shared_ptr<const vision::Image>>& images,
                                  std::vector<std::shared_ptr<const vision::AudioClip>>& audio);

// Moves the item's frames to `images` (each holding its share of the
// pixels' charge) and returns the text that stands for them in the prompt:
// one media marker per frame.
std::string take_frames(MediaItem& it, std::vector<std::shared_ptr<const vision::Image>>& images);

// An image that keeps `charge` (its pixels in the memory budget) as long as
// it lives.
std::shared_ptr<const vision::Image> charged_image(vision::Image&& img, MemoryCharge&& charge);

using ImageList = std::vector<std::shared_ptr<const vision::Image>>;
using AudioList = std::vector<std::shared_ptr<const vision::AudioClip>>;

// Any item: an audio item's clip moves to `audio` (text: one kAudioMarker),
// anything else's frames to `images` (take_frames).
std::string take_media(MediaItem& it, ImageList& images, AudioList& audio);

// The audio parts (media_audio.cpp): shapes only, as parse_message_media's.
// `where` names the part ("messages[1].content[0]").
MediaItem input_audio_item(const nlohmann::json& part, const std::string& where);
MediaItem audio_url_item(const nlohmann::json& part, const std::string& where);

struct MediaCounters {
  std::atomic<uint64_t> images{0}, videos{0}, frames{0};  // loaded successfully
  std::atomic<uint64_t> refused{0};                       // media that failed to load
  std::atomic<uint64_t> load_us{0};                       // time spent fetching + decoding
  std::atomic<uint64_t> audio{0};                         // clips loaded successfully
  std::atomic<uint64_t> requests_refused_no_vision{0};
  std::atomic<uint64_t> refused_memory{0};  // 503: decoded pixels did not fit the budget
};

class MediaService {
 public:
  explicit MediaService(const MediaOptions& opts);

  const vision::MediaPolicy& policy() const { return policy_; }
  vision::EmbeddingCache& cache() { return cache_; }
  const vision::EmbeddingCache& cache() const { return cache_; }
  const MediaCounters& counters() const { return counters_; }
  bool vision() const { return vision_; }  // a projector is loaded (--mmproj)
  void set_vision(bool on) { vision_ = on; }
  bool audio() const { return audio_; }  // an audio encoder is loaded (--mmproj)
  void set_audio(bool on) { audio_ = on; }
  // The longest side a video frame is scaled to as it is decoded: what the
  // projector's preprocessing needs (its longest resize target).
  void set_frame_side(int side) { frame_side_ = side; }
  int frame_side() const { return frame_side_; }

  // Loads every item's frames (and their hashes), at most max_items frames
  // in all, counted before they are decoded; decoded pixels are charged to
  // the memory budget (MmPixels) before they are allocated. Throws ApiError
  // naming the part: 403 for a forbidden source, 503 insufficient_memory
  // when the pixels do not fit, 400 otherwise.
  void load(MessageMedia& m);

  // A picture of a stored conversation decoded again from its source; 400
  // (param `param`) when it cannot be loaded or its pixels are not `hash`'s.
  std::shared_ptr<const vision::Image> reload(const std::string& url, const Sha256Digest& hash,
                                              const std::string& param);
  // The same for an audio clip (hash: its pcm_hash).
  std::shared_ptr<const vision::AudioClip> reload_audio(const std::string& url,
                                                        const Sha256Digest& hash,
                                                        const std::string& param);

  // Every API's media: loads the items (parsed by the API, each naming its
  // part), once their remote sources have been fetched (else NeedsRemoteMedia,
  // before anything is loaded); with media and no vision projector, 400
  // model_not_multimodal once the media has been validated.
  void check(MessageMedia& m);

  // The chat hook: parses and loads the media of a chat request body; with
  // media and no vision projector, answers 400 model_not_multimodal once the
  // media has been validated. Returns what was loaded (empty without media).
  // Remote URLs must have been fetched first (remote_media.h): without
  // their bytes in the current FetchedMediaScope this throws
  // NeedsRemoteMedia naming them, before anything is loaded.
  MessageMedia check_chat_request(const nlohmann::json& body);

  std::string render_metrics() const;  // Prometheus text, appended to /metrics

 private:
  void require_fetched(const MessageMedia& m) const;

  MediaOptions opts_;
  vision::MediaPolicy policy_;
  vision::EmbeddingCache cache_;
  MemoryCharge charge_pixels(size_t bytes, const MediaItem& it);
  void load_item(MediaItem& it, size_t loaded);
  void load_audio(MediaItem& it);  // media_audio.cpp
  // One medium of a stored conversation, loaded again (see reload).
  MediaItem reload_item(MediaItem::Kind kind, const std::string& url, const Sha256Digest& hash,
                        const std::string& param);

  MediaCounters counters_;
  bool vision_ = false;
  bool audio_ = false;
  int frame_side_ = kDefaultFrameSide;

 public:
  // Without a projector (a text-only server refuses media once it is valid).
  static constexpr int kDefaultFrameSide = 1024;
};

class MediaService;
// A chat request whose messages may carry media: checked and loaded by
// `media` (ApiErrors as check_chat_request), then parsed with each frame as a
// media marker in its message's text and the frames in GenerationRequest::images
// (each clip as an audio marker, the clips in GenerationRequest::audio).
GenerationRequest parse_chat_with_media(MediaService& media, const nlohmann::json& body,
                                        const std::vector<std::string>& extra_keys,
                                        UnknownFields unknown);

}  // namespace tern::server
