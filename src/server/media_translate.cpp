#include "tern/server/media_translate.h"

#include <memory>
#include <string>
#include <string_view>

#include "json_fields.h"
#include "tern/engine/media_prompt.h"

namespace tern::server {
namespace {

using json = nlohmann::json;
using namespace fields;

// What one API calls its media part. `item` returns false for parts that
// are not media, else fills in the item's source (its param is set after).
struct Shape {
  const char* list;       // "messages" or "input"
  const char* text_type;  // the text part the media becomes: "text", "input_text"
  bool (*item)(const json& part, const std::string& where, MediaItem& it);
};

bool anthropic_part(const json& b, const std::string& where, MediaItem& it) {
  std::string type;
  if (!b.is_object() || !get_string(b, "type", type)) return false;
  if (type == "audio" || type == "input_audio" || type == "audio_url")
    unsupported(where + ".type",
                "the Messages API has no audio content block; send audio as an 'input_audio' "
                "part to /v1/chat/completions or /v1/responses.");
  if (type != "image") return false;
  const json* src = field(b, "source");
  if (!src) missing(where + ".source");
  if (!src->is_object()) wrong_type(where + ".source", "an object", *src);
  std::string kind, url;
  if (!get_string(*src, "type", kind)) missing(where + ".source.type");
  if (kind == "base64") {
    std::string mt, data;
    if (!get_string(*src, "media_type", mt)) missing(where + ".source.media_type");
    if (mt != "image/jpeg" && mt != "image/png" && mt != "image/gif" && mt != "image/webp")
      bad_value(where + ".source.media_type",
                "'" + mt + "' is not one of 'image/jpeg', 'image/png', 'image/gif', 'image/webp'.");
    if (!get_string(*src, "data", data)) missing(where + ".source.data");
    url = "data:" + mt + ";base64," + data;
  } else if (kind == "url") {
    if (!get_string(*src, "url", url)) missing(where + ".source.url");
  } else {
    unsupported(where + ".source.type",
                "image sources of type '" + kind + "' are not supported; use 'base64' or 'url'.");
  }
  it.urls = {std::move(url)};
  it.source_param = where + ".source";
  return true;
}

bool responses_part(const json& p, const std::string& where, MediaItem& it) {
  std::string type;
  if (!p.is_object() || !get_string(p, "type", type)) return false;
  if (type == "input_audio") {  // chat's shape: {"input_audio": {"data", "format"}}
    it = input_audio_item(p, where);
    return true;
  }
  if (type != "input_image") return false;
  if (field(p, "file_id"))
    unsupported(where + ".file_id", "file ids are not supported; send the image as image_url.");
  std::string url;
  if (!get_string(p, "image_url", url)) missing(where + ".image_url");
  get_string(p, "detail", it.detail);
  if (it.detail != "auto" && it.detail != "low" && it.detail != "high")
    bad_value(where + ".detail", "'" + it.detail + "' is not one of 'auto', 'low' or 'high'.");
  it.urls = {std::move(url)};
  it.source_param = where + ".image_url";
  return true;
}

// The API's media parts, loaded by the same MediaService as chat's, then
// each replaced in a copy of the body by a text part of its markers.
// Audio goes to `audio` (with its sources in audio_sources); null refuses it.
struct Outputs {
  ImageList& images;
  std::vector<ImageSource>* sources = nullptr;
  AudioList* audio = nullptr;
  std::vector<ImageSource>* audio_sources = nullptr;
};

json with_markers(MediaService& media, const json& body, const Shape& s, const Outputs& o) {
  const json* list = field(body, s.list);
  if (!list || !list->is_array()) return body;  // the API's own parser reports it
  MessageMedia m;
  std::vector<std::pair<size_t, size_t>> at;  // each item's message and part
  for (size_t i = 0; i < list->size(); ++i) {
    const json& msg = (*list)[i];
    const json* c = msg.is_object() ? field(msg, "content") : nullptr;
    if (!c || !c->is_array()) continue;
    for (size_t k = 0; k < c->size(); ++k) {
      const std::string where =
          std::string(s.list) + "[" + std::to_string(i) + "].content[" + std::to_string(k) + "]";
      MediaItem it;
      if (!s.item((*c)[k], where, it)) continue;
      it.param = where;
      m.items.push_back(std::move(it));
      at.emplace_back(i, k);
    }
  }
  if (!m.any()) return body;
  media.check(m);
  json out = body;
  AudioList no_audio;
  for (size_t n = 0; n < m.items.size(); ++n) {
    MediaItem& it = m.items[n];
    const bool audio = it.kind == MediaItem::Kind::Audio;
    if (audio && !o.audio)
      throw ApiError::bad_request("Audio is not accepted in '" + it.param + "'.", it.param,
                                  "invalid_value");
    if (auto* srcs = audio ? o.audio_sources : o.sources)
      for (size_t k = 0; k < it.hashes.size(); ++k)
        srcs->push_back({std::make_shared<const std::string>(it.urls.at(k)), it.hashes[k]});
    const std::string text = take_media(it, o.images, audio ? *o.audio : no_audio);
    out[s.list][at[n].first]["content"][at[n].second] = {{"type", s.text_type}, {"text", text}};
  }
  return out;
}

size_t count_markers(const std::string& text, std::string_view marker = kMediaMarker) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(marker, at)) != std::string::npos; at += marker.size()) ++n;
  return n;
}

// Gives each message with `marker`s but no media yet (m.*have empty) its
// share of `media` (and of `sources`, when there is one per medium).
template <class T>
void attach(std::vector<Message>& messages, std::string_view marker,
            std::vector<std::shared_ptr<const T>> Message::*have,
            std::vector<ImageSource> Message::*have_sources,
            std::vector<std::shared_ptr<const T>> media, std::vector<ImageSource> sources,
            const char* what) {
  const bool with_sources = sources.size() == media.size();
  size_t next = 0;
  for (Message& m : messages) {
    const size_t n = count_markers(m.content, marker);
    if (n == 0 || !(m.*have).empty()) continue;
    if (next + n > media.size()) break;
    const auto from = std::ptrdiff_t(next), to = std::ptrdiff_t(next + n);
    (m.*have).assign(media.begin() + from, media.begin() + to);
    if (with_sources) (m.*have_sources).assign(sources.begin() + from, sources.begin() + to);
    next += n;
  }
  size_t marked = 0, got = 0;
  for (const Message& m : messages)
    marked += count_markers(m.content, marker), got += (m.*have).size();
  if (next != media.size() || marked != got)
    throw ApiError::bad_request(
        "The input's media markers (" + std::string(marker) + ") do not match its " + what + ".",
        "input", "invalid_value");
}

}  // namespace

json anthropic_with_media_markers(MediaService& media, const json& body, ImageList& images) {
  static const Shape s{"messages", "text", anthropic_part};
  return with_markers(media, body, s, {.images = images});
}

json responses_with_media_markers(MediaService& media, const json& body, ImageList& images,
                                  std::vector<ImageSource>* sources) {
  static const Shape s{"input", "input_text", responses_part};
  return with_markers(media, body, s, {.images = images, .sources = sources});
}

json responses_with_media_markers(MediaService& media, const json& body, ImageList& images,
                                  std::vector<ImageSource>* sources, AudioList& audio,
                                  std::vector<ImageSource>* audio_sources) {
  static const Shape s{"input", "input_text", responses_part};
  return with_markers(
      media, body, s,
      {.images = images, .sources = sources, .audio = &audio, .audio_sources = audio_sources});
}

void attach_images(std::vector<Message>& messages, ImageList images,
                   std::vector<ImageSource> sources) {
  attach(messages, kMediaMarker, &Message::images, &Message::image_sources, std::move(images),
         std::move(sources), "images");
}

void attach_audio(std::vector<Message>& messages, AudioList audio,
                  std::vector<ImageSource> sources) {
  attach(messages, kAudioMarker, &Message::audio, &Message::audio_sources, std::move(audio),
         std::move(sources), "audio clips");
}

}  // namespace tern::server
