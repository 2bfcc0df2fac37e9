// Audio parts of chat messages (and of the Responses input): their shapes,
// and the clip decoded under the media policy and --max-audio-seconds.
#include <string>

#include "json_fields.h"
#include "tern/server/media_parts.h"
#include "tern/vision/audio.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;

// The containers decode_audio opens (the bytes are sniffed; the format only
// has to be one of these).
constexpr const char* kFormats[] = {"wav", "mp3", "flac", "ogg", "opus"};

}  // namespace

// input_audio: {"data": base64, "format": "wav" | "mp3" | ...}.
MediaItem input_audio_item(const json& part, const std::string& where) {
  MediaItem it;
  it.kind = MediaItem::Kind::Audio;
  const std::string w = where + ".input_audio";
  const json* v = field(part, "input_audio");
  if (!v) missing(w);
  if (!v->is_object()) wrong_type(w, "an object", *v);
  std::string data, format;
  if (!get_string(*v, "data", data)) missing(w + ".data");
  if (data.empty()) bad_value(w + ".data", "the audio data is empty.");
  if (!get_string(*v, "format", format)) missing(w + ".format");
  bool known = false;
  for (const char* f : kFormats) known |= format == f;
  if (!known)
    bad_value(w + ".format",
              "'" + format + "' is not one of 'wav', 'mp3', 'flac', 'ogg' or 'opus'.");
  it.urls = {"data:audio/" + format + ";base64," + data};
  it.source_param = w + ".data";
  return it;
}

// audio_url: {"url": ...} (a bare string too, as image_url accepts).
MediaItem audio_url_item(const json& part, const std::string& where) {
  MediaItem it;
  it.kind = MediaItem::Kind::Audio;
  const std::string w = where + ".audio_url";
  const json* v = field(part, "audio_url");
  if (!v) missing(w);
  std::string url;
  if (v->is_string()) {
    url = v->get<std::string>();
    it.source_param = w;
  } else {
    if (!v->is_object()) wrong_type(w, "an object", *v);
    if (!get_string(*v, "url", url)) missing(w + ".url");
    it.source_param = w + ".url";
  }
  if (url.empty()) bad_value(it.source_param, "the URL is empty.");
  it.urls = {std::move(url)};
  return it;
}

// The clip, its identity, and its samples charged to the memory budget
// (MmPixels, as decoded pictures are) once decoded: decode_audio refuses a
// clip over the duration limit from its headers before decoding it.
void MediaService::load_audio(MediaItem& it) {
  vision::AudioOptions ao;
  ao.max_seconds = opts_.max_audio_seconds;
  it.audio = vision::load_audio_url(it.urls.at(0), ao, policy_);
  it.pixels = charge_pixels(it.audio.samples.size() * sizeof(float), it);
  it.hashes = {vision::pcm_hash(it.audio)};
}

std::shared_ptr<const vision::AudioClip> MediaService::reload_audio(const std::string& url,
                                                                    const Sha256Digest& hash,
                                                                    const std::string& param) {
  MediaItem it = reload_item(MediaItem::Kind::Audio, url, hash, param);
  ImageList none;
  AudioList audio;
  take_media(it, none, audio);
  return audio.at(0);
}

}  // namespace tern::server
