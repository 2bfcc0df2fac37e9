#include "tern/server/media_parts.h"

#include <algorithm>
#include <charconv>
#include <chrono>

#include "json_fields.h"
#include "tern/engine/media_prompt.h"
#include "tern/server/remote_media.h"
#include "tern/vision/video.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;
using vision::MediaErrorKind;

const json* object_field(const json& part, const char* key, const std::string& where) {
  const json* v = field(part, key);
  if (!v) missing(where + "." + key);
  if (!v->is_object()) wrong_type(where + "." + key, "an object", *v);
  return v;
}

std::string url_of(const json& o, const std::string& where) {
  std::string url;
  if (!get_string(o, "url", url)) missing(where + ".url");
  if (url.empty()) bad_value(where + ".url", "the URL is empty.");
  return url;
}

// image_url: {"url", "detail"} (a bare string is accepted too, as vLLM does).
MediaItem image_item(const json& part, const std::string& where) {
  MediaItem it;
  it.kind = MediaItem::Kind::Image;
  const json* v = field(part, "image_url");
  if (!v) missing(where + ".image_url");
  if (v->is_string()) {
    it.urls = {v->get<std::string>()};
    if (it.urls[0].empty()) bad_value(where + ".image_url", "the URL is empty.");
    return it;
  }
  if (!v->is_object()) wrong_type(where + ".image_url", "an object", *v);
  it.urls = {url_of(*v, where + ".image_url")};
  if (get_string(*v, "detail", it.detail) && it.detail != "auto" && it.detail != "low" &&
      it.detail != "high")
    bad_value(where + ".image_url.detail",
              "'" + it.detail + "' is not one of 'auto', 'low' or 'high'.");
  return it;
}

// video_url: {"url", "fps", "max_frames"}.
MediaItem video_url_item(const json& part, const std::string& where) {
  MediaItem it;
  it.kind = MediaItem::Kind::VideoUrl;
  const std::string w = where + ".video_url";
  const json& v = *object_field(part, "video_url", where);
  it.urls = {url_of(v, w)};
  double fps = 0;
  if (get_number(v, "fps", fps)) {
    if (!(fps > 0) || fps > 1000) bad_value(w + ".fps", "must be greater than 0 and at most 1000.");
    it.fps = fps;
  }
  int64_t n = 0;
  if (get_int(v, "max_frames", n)) {
    check_range((w + ".max_frames").c_str(), double(n), 1, 1024);
    it.max_frames = int(n);
  }
  return it;
}

// video: {"frames": ["<image url>" or {"url"}, ...]}.
MediaItem video_frames_item(const json& part, const std::string& where) {
  MediaItem it;
  it.kind = MediaItem::Kind::VideoFrames;
  const json* f = field(part, "frames");
  if (!f) missing(where + ".frames");
  if (!f->is_array()) wrong_type(where + ".frames", "an array of image URLs", *f);
  if (f->empty()) bad_value(where + ".frames", "a video needs at least one frame.");
  for (size_t k = 0; k < f->size(); ++k) {
    const std::string fw = where + ".frames[" + std::to_string(k) + "]";
    const json& x = (*f)[k];
    if (x.is_string() && !x.get<std::string>().empty())
      it.urls.push_back(x.get<std::string>());
    else if (x.is_object())
      it.urls.push_back(url_of(x, fw));
    else
      wrong_type(fw, "an image URL", x);
  }
  return it;
}

ApiError media_error(const vision::MediaError& e, const MediaItem& it) {
  const bool image = it.kind == MediaItem::Kind::Image;
  const bool audio = it.kind == MediaItem::Kind::Audio;
  const std::string& param = it.source_param;
  const std::string what = image ? "image" : audio ? "audio" : "video";
  const std::string msg = "Invalid " + what + " in '" + it.param + "': " + e.what();
  switch (e.kind()) {
    case MediaErrorKind::Forbidden:
      return ApiError(403, "invalid_request_error",
                      "Forbidden " + what + " source in '" + it.param + "': " + e.what(), param,
                      "media_forbidden");
    case MediaErrorKind::TooLarge:
      return ApiError::bad_request(msg, param, "media_too_large");
    case MediaErrorKind::Unsupported:
      return ApiError::bad_request(msg, param, "unsupported_media");
    case MediaErrorKind::Fetch:
      return ApiError::bad_request(msg, param, "media_fetch_failed");
    case MediaErrorKind::Invalid:
      break;
  }
  return ApiError::bad_request(msg, param,
                               image   ? "invalid_image"
                               : audio ? "invalid_audio"
                                       : "invalid_video");
}

ApiError too_many_media(const MediaItem& it, int max_items) {
  return ApiError::bad_request(
      "Too many images, video frames and audio clips in one request "
      "(at most " +
          std::to_string(max_items) + ").",
      it.param, "too_many_media");
}

void sample(std::string& out, const std::string& name, double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out += name + " " + std::string(buf, r.ptr) + "\n";
}
void header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

MessageMedia parse_message_media(const json& body) {
  MessageMedia out;
  const json* msgs = field(body, "messages");
  if (!msgs || !msgs->is_array()) return out;  // parse_chat_request reports it
  out.messages.resize(msgs->size());
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const json* c = m.is_object() ? field(m, "content") : nullptr;
    if (!c || !c->is_array()) continue;
    for (size_t k = 0; k < c->size(); ++k) {
      const json& part = (*c)[k];
      const std::string where =
          "messages[" + std::to_string(i) + "].content[" + std::to_string(k) + "]";
      std::string type;
      if (!part.is_object() || !get_string(part, "type", type)) continue;  // the main parser's
      MediaItem it;
      if (type == "image_url")
        it = image_item(part, where);
      else if (type == "video_url")
        it = video_url_item(part, where);
      else if (type == "video")
        it = video_frames_item(part, where);
      else if (type == "input_audio")
        it = input_audio_item(part, where);
      else if (type == "audio_url")
        it = audio_url_item(part, where);
      else {
        if (type == "text" && part.contains("text") && part["text"].is_string())
          out.messages[i].push_back({part["text"].get<std::string>(), -1});
        continue;
      }
      it.param = where;
      if (it.source_param.empty())  // the audio items name theirs
        it.source_param = where + (type == "image_url"   ? ".image_url.url"
                                   : type == "video_url" ? ".video_url.url"
                                                         : ".frames");
      out.messages[i].push_back({"", int(out.items.size())});
      out.items.push_back(std::move(it));
    }
  }
  return out;
}

std::string take_frames(MediaItem& it, std::vector<std::shared_ptr<const vision::Image>>& images) {
  std::string markers;
  for (vision::Image& frame : it.frames) {
    markers += kMediaMarker;
    MemoryCharge share = it.pixels.split(frame.rgb.size());
    images.push_back(charged_image(std::move(frame), std::move(share)));
  }
  it.frames.clear();
  return markers;
}

std::string take_media(MediaItem& it, ImageList& images, AudioList& audio) {
  if (it.kind != MediaItem::Kind::Audio) return take_frames(it, images);
  struct Charged {
    vision::AudioClip clip;
    MemoryCharge charge;
  };
  auto c = std::make_shared<Charged>(Charged{std::move(it.audio), std::move(it.pixels)});
  audio.push_back(std::shared_ptr<const vision::AudioClip>(c, &c->clip));
  return std::string(kAudioMarker);
}

json with_media_markers(const json& body, MessageMedia& m,
                        std::vector<std::shared_ptr<const vision::Image>>& images) {
  AudioList audio;
  json out = with_media_markers(body, m, images, audio);
  if (!audio.empty())
    throw ApiError::bad_request("This request's audio has no place here.", "messages",
                                "invalid_value");
  return out;
}

json with_media_markers(const json& body, MessageMedia& m, ImageList& images, AudioList& audio) {
  json out = body;
  json& msgs = out["messages"];
  size_t next = 0;
  for (json& msg : msgs) {
    json* c = msg.is_object() && msg.contains("content") ? &msg["content"] : nullptr;
    if (!c || !c->is_array()) continue;
    for (json& part : *c) {
      std::string type;
      if (!part.is_object() || !get_string(part, "type", type)) continue;
      if (type != "image_url" && type != "video_url" && type != "video" && type != "input_audio" &&
          type != "audio_url")
        continue;
      part = json{{"type", "text"}, {"text", take_media(m.items.at(next++), images, audio)}};
    }
  }
  return out;
}

GenerationRequest parse_chat_with_media(MediaService& media, const json& body,
                                        const std::vector<std::string>& extra_keys,
                                        UnknownFields unknown) {
  MessageMedia m = media.check_chat_request(body);
  if (!m.any()) return parse_chat_request(body, extra_keys, unknown);
  ImageList images;
  AudioList audio;
  GenerationRequest g =
      parse_chat_request(with_media_markers(body, m, images, audio), extra_keys, unknown);
  g.images = std::move(images);
  g.audio = std::move(audio);
  return g;
}

MediaService::MediaService(const MediaOptions& opts)
    : opts_(opts),
      cache_(vision::EmbeddingCacheOptions{.dram_bytes = opts.cache_bytes,
                                           .flash_dir = opts.cache_dir,
                                           .flash_bytes = opts.cache_dir_bytes,
                                           .budget = opts.budget}) {
  policy_.media_dir = opts.media_dir;
  policy_.allow_remote = opts.allow_remote;
  policy_.max_bytes = opts.max_media_bytes;
  policy_.max_pixels = opts.max_image_pixels;
  policy_.remote_timeout_ms = opts.remote_timeout_ms;
  policy_.max_redirects = opts.max_redirects;
  policy_.allow_hosts = opts.allow_hosts;
  // Remote bytes are fetched before the preparation, on the reactor
  // (media_prefetch.h); the policy's fetcher only hands them over.
  if (opts.allow_remote) policy_.fetch = fetched_media_bytes;
}

std::shared_ptr<const vision::Image> charged_image(vision::Image&& img, MemoryCharge&& charge) {
  struct Charged {
    vision::Image image;
    MemoryCharge charge;
  };
  auto c = std::make_shared<Charged>(Charged{std::move(img), std::move(charge)});
  return std::shared_ptr<const vision::Image>(c, &c->image);
}

MemoryCharge MediaService::charge_pixels(size_t bytes, const MediaItem& it) {
  MemoryBudget* b = opts_.budget;
  if (!b || bytes == 0) return {};
  // Cached embeddings may give way (they stay on --mm-cache-dir); the KV is
  // the engine thread's to give back, never this one's.
  if (b->charge(MemPool::MmPixels, bytes, {MemPool::MmCache}))
    return MemoryCharge(b, MemPool::MmPixels, bytes);
  counters_.refused_memory.fetch_add(1, std::memory_order_relaxed);
  const size_t cap = std::min(b->limit(MemPool::MmPixels), b->total());
  const auto mib = [](size_t n) { return std::to_string((n + (1 << 20) - 1) >> 20); };
  throw ApiError(503, "server_error",
                 "The decoded images and video frames of this request do not fit the server's "
                 "memory budget now (" +
                     mib(bytes) + " MiB more in '" + it.param + "'; at most " + mib(cap) +
                     " MiB of decoded media at once, --mm-pixels-mb). Retry later, or "
                     "send fewer or smaller pictures.",
                 it.param, "insufficient_memory");
}

// One item's frames; `loaded` frames of the request came before it.
void MediaService::load_item(MediaItem& it, size_t loaded) {
  const size_t max_items = size_t(opts_.max_items);
  if (it.kind == MediaItem::Kind::Audio) {
    if (loaded >= max_items) throw too_many_media(it, opts_.max_items);
    return load_audio(it);
  }
  if (it.kind == MediaItem::Kind::VideoUrl) {
    vision::VideoOptions vo;
    vo.fps = it.fps > 0 ? it.fps : opts_.default_fps;
    vo.max_frames = it.max_frames > 0 ? it.max_frames : opts_.default_max_frames;
    vo.max_side = frame_side_;
    size_t counted = 0;  // frames the clip will give, agreed before decoding them
    vo.reserve = [&](int n, size_t each) {
      counted += size_t(n);
      if (loaded + counted > max_items) throw too_many_media(it, opts_.max_items);
      it.pixels.merge(charge_pixels(size_t(n) * each, it));
    };
    vision::VideoFrames v = vision::load_video_url(it.urls[0], vo, policy_);
    it.frames = std::move(v.frames);
    it.timestamps_s = std::move(v.timestamps_s);
    return;
  }
  for (const std::string& url : it.urls) {
    if (loaded + it.frames.size() >= max_items) throw too_many_media(it, opts_.max_items);
    // While decoding, the decoder's buffer and the image's: twice the pixels.
    MemoryCharge decoding;
    size_t bytes = 0;
    const vision::PixelReserve reserve = [&](int w, int h) {
      bytes = size_t(w) * size_t(h) * 3;
      decoding = charge_pixels(2 * bytes, it);
    };
    it.frames.push_back(vision::load_image_url(url, policy_, reserve));
    it.pixels.merge(decoding.split(bytes));
  }
}

void MediaService::load(MessageMedia& m) {
  const auto t0 = std::chrono::steady_clock::now();
  size_t total = 0;
  for (MediaItem& it : m.items) {
    try {
      load_item(it, total);
    } catch (const vision::MediaError& e) {
      counters_.refused.fetch_add(1, std::memory_order_relaxed);
      throw media_error(e, it);
    }
    if (it.kind == MediaItem::Kind::Audio) {
      total += 1;
      counters_.audio.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    total += it.frames.size();
    if (total > size_t(opts_.max_items)) throw too_many_media(it, opts_.max_items);
    for (const vision::Image& img : it.frames) it.hashes.push_back(vision::pixel_hash(img));
    auto& n = it.kind == MediaItem::Kind::Image ? counters_.images : counters_.videos;
    n.fetch_add(1, std::memory_order_relaxed);
    counters_.frames.fetch_add(it.frames.size(), std::memory_order_relaxed);
  }
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  counters_.load_us.fetch_add(uint64_t(us.count()), std::memory_order_relaxed);
}

MediaItem MediaService::reload_item(MediaItem::Kind kind, const std::string& url,
                                    const Sha256Digest& hash, const std::string& param) {
  const bool audio = kind == MediaItem::Kind::Audio;
  const std::string what = audio ? "An audio clip" : "A picture";
  MessageMedia m;
  MediaItem& it = m.items.emplace_back();
  it.kind = kind;
  it.param = it.source_param = param;
  it.urls = {url};
  require_fetched(m);  // a remote source is fetched again on the reactor first
  try {
    load(m);
  } catch (const ApiError& e) {
    if (e.status() == 503) throw;
    throw ApiError::bad_request(
        what + " of the stored conversation could not be loaded again: " + std::string(e.what()),
        param, "invalid_value");
  }
  if (it.hashes.at(0) != hash)
    throw ApiError::bad_request(what + " of the stored conversation is not the same " +
                                    (audio ? "sound any more (its source now decodes to other "
                                             "samples)."
                                           : "picture any more (its source now decodes to other "
                                             "pixels)."),
                                param, "invalid_value");
  return std::move(it);
}

std::shared_ptr<const vision::Image> MediaService::reload(const std::string& url,
                                                          const Sha256Digest& hash,
                                                          const std::string& param) {
  MediaItem it = reload_item(MediaItem::Kind::Image, url, hash, param);
  MemoryCharge share = it.pixels.split(it.frames[0].rgb.size());
  return charged_image(std::move(it.frames[0]), std::move(share));
}

void MediaService::require_fetched(const MessageMedia& m) const {
  if (!policy_.allow_remote || !policy_.fetch) return;  // load refuses remote URLs
  const FetchedMedia* fetched = FetchedMediaScope::current();
  std::vector<std::string> missing;
  size_t remote = 0;
  for (const MediaItem& it : m.items) {
    for (const std::string& url : it.urls) {
      if (!vision::is_remote_url(url)) continue;
      if (++remote > size_t(opts_.max_items)) {
        const std::string most = std::to_string(opts_.max_items);
        throw ApiError::bad_request(
            "Too many remote media URLs in one request (at most " + most + ").", it.param,
            "too_many_media");
      }
      if (!fetched || !fetched->has(url)) missing.push_back(url);
    }
  }
  if (!missing.empty()) throw NeedsRemoteMedia(std::move(missing));
}

MessageMedia MediaService::check_chat_request(const json& body) {
  MessageMedia m = parse_message_media(body);
  check(m);
  return m;
}

void MediaService::check(MessageMedia& m) {
  if (!m.any()) return;
  require_fetched(m);
  load(m);
  for (const MediaItem& it : m.items) {
    const bool audio = it.kind == MediaItem::Kind::Audio;
    if (audio ? audio_ : vision_) continue;
    counters_.requests_refused_no_vision.fetch_add(1, std::memory_order_relaxed);
    if (audio)
      throw ApiError::bad_request(
          "This model has no audio encoder; start tern with --mmproj naming an audio projector "
          "(Ultravox, Qwen2-Audio / Qwen2.5-Omni, Voxtral) to send audio (in '" +
              it.param + "').",
          it.param, "model_not_multimodal");
    throw ApiError::bad_request(
        "This model has no vision projector; start tern with --mmproj to send images or video "
        "(in '" +
            it.param + "').",
        it.param, "model_not_multimodal");
  }
}

std::string MediaService::render_metrics() const {
  std::string out;
  header(out, "tern_media_items_total", "counter", "Media loaded from requests, by kind.");
  sample(out, "tern_media_items_total{kind=\"image\"}", double(counters_.images));
  sample(out, "tern_media_items_total{kind=\"video\"}", double(counters_.videos));
  sample(out, "tern_media_items_total{kind=\"frame\"}", double(counters_.frames));
  sample(out, "tern_media_items_total{kind=\"audio\"}", double(counters_.audio));
  header(out, "tern_media_refused_total", "counter",
         "Media parts refused (bad, forbidden, too large).");
  sample(out, "tern_media_refused_total", double(counters_.refused));
  header(out, "tern_media_load_seconds_total", "counter",
         "Time spent fetching and decoding media.");
  sample(out, "tern_media_load_seconds_total", double(counters_.load_us) / 1e6);
  const vision::EmbeddingCacheStats s = cache_.stats();
  header(out, "tern_mm_cache_hits_total", "counter", "Embedding cache hits, by tier.");
  sample(out, "tern_mm_cache_hits_total{tier=\"dram\"}", double(s.dram.hits));
  sample(out, "tern_mm_cache_hits_total{tier=\"flash\"}", double(s.flash.hits));
  header(out, "tern_mm_cache_misses_total", "counter", "Embedding cache misses.");
  sample(out, "tern_mm_cache_misses_total", double(s.misses));
  header(out, "tern_mm_cache_evictions_total", "counter", "Embedding cache evictions, by tier.");
  sample(out, "tern_mm_cache_evictions_total{tier=\"dram\"}", double(s.dram.evictions));
  sample(out, "tern_mm_cache_evictions_total{tier=\"flash\"}", double(s.flash.evictions));
  header(out, "tern_mm_cache_bytes", "gauge", "Embedding cache bytes held, by tier.");
  sample(out, "tern_mm_cache_bytes{tier=\"dram\"}", double(s.dram.bytes));
  sample(out, "tern_mm_cache_bytes{tier=\"flash\"}", double(s.flash.bytes));
  header(out, "tern_mm_cache_entries", "gauge", "Embedding cache entries, by tier.");
  sample(out, "tern_mm_cache_entries{tier=\"dram\"}", double(s.dram.entries));
  sample(out, "tern_mm_cache_entries{tier=\"flash\"}", double(s.flash.entries));
  header(out, "tern_mm_cache_flash_dropped_total", "counter",
         "Damaged flash entries found on load and deleted.");
  sample(out, "tern_mm_cache_flash_dropped_total", double(s.flash_dropped));
  header(out, "tern_mm_cache_flash_write_errors_total", "counter",
         "Flash writes that failed (the tier then turns off).");
  sample(out, "tern_mm_cache_flash_write_errors_total", double(s.flash_write_errors));
  return out;
}

}  // namespace tern::server
