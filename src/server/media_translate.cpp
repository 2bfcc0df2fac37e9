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

// What one API calls its media part, and how it reads as a chat image_url
// part. `to_chat` returns false for parts that are not media.
struct Shape {
  const char* list;  // "messages" or "input"
  const char* what;  // the part's media field in errors: "source", "image_url"
  bool (*to_chat)(const json& part, const std::string& where, json& chat);
};

bool anthropic_part(const json& b, const std::string& where, json& chat) {
  std::string type;
  if (!b.is_object() || !get_string(b, "type", type) || type != "image") return false;
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
  chat = json{{"type", "image_url"}, {"image_url", {{"url", url}}}};
  return true;
}

bool responses_part(const json& p, const std::string& where, json& chat) {
  std::string type;
  if (!p.is_object() || !get_string(p, "type", type) || type != "input_image") return false;
  if (field(p, "file_id"))
    unsupported(where + ".file_id", "file ids are not supported; send the image as image_url.");
  std::string url, detail = "auto";
  if (!get_string(p, "image_url", url)) missing(where + ".image_url");
  get_string(p, "detail", detail);
  chat = json{{"type", "image_url"}, {"image_url", {{"url", url}, {"detail", detail}}}};
  return true;
}

// The chat body with the same message and part positions as `body`'s list:
// media parts translated, everything else an empty text part.
json as_chat(const json& body, const Shape& s, bool& any) {
  json chat = {{"messages", json::array()}};
  const json* list = field(body, s.list);
  if (!list || !list->is_array()) return chat;  // the API's own parser reports it
  for (size_t i = 0; i < list->size(); ++i) {
    const json& m = (*list)[i];
    json parts = json::array();
    const json* c = m.is_object() ? field(m, "content") : nullptr;
    if (c && c->is_array()) {
      for (size_t k = 0; k < c->size(); ++k) {
        const std::string where =
            std::string(s.list) + "[" + std::to_string(i) + "].content[" + std::to_string(k) + "]";
        json p;
        if (s.to_chat((*c)[k], where, p)) {
          any = true;
          parts.push_back(std::move(p));
        } else {
          parts.push_back({{"type", "text"}, {"text", ""}});
        }
      }
    }
    chat["messages"].push_back({{"role", "user"}, {"content", std::move(parts)}});
  }
  return chat;
}

// "messages[i].content[k].image_url.url" -> "<list>[i].content[k].<what>".
std::string api_param(const std::string& p, const Shape& s) {
  if (!p.starts_with("messages[")) return p;
  std::string out = s.list + p.substr(std::string_view("messages").size());
  const size_t at = out.find(".image_url");
  if (at != std::string::npos) out = out.substr(0, at) + "." + s.what;
  return out;
}

json with_markers(MediaService& media, const json& body, const Shape& s, ImageList& images,
                  std::vector<ImageSource>* sources) {
  bool any = false;
  json chat = as_chat(body, s, any);
  if (!any) return body;
  MessageMedia m;
  json marked;
  try {
    m = media.check_chat_request(chat);
    if (sources)
      for (const MediaItem& it : m.items)
        for (size_t k = 0; k < it.hashes.size(); ++k)
          sources->push_back({std::make_shared<const std::string>(it.urls.at(k)), it.hashes[k]});
    marked = with_media_markers(chat, m, images);
  } catch (const ApiError& e) {
    std::string msg = e.what();
    const std::string list = s.list;
    for (size_t at = 0; (at = msg.find("'messages[", at)) != std::string::npos;
         at += list.size() + 1)
      msg.replace(at + 1, std::string_view("messages").size(), list);
    throw ApiError(e.status(), e.type(), msg, api_param(e.param(), s), e.code());
  }
  json out = body;
  json& list = out[s.list];
  for (size_t i = 0; i < list.size(); ++i) {
    json* c = list[i].is_object() && list[i].contains("content") ? &list[i]["content"] : nullptr;
    if (!c || !c->is_array()) continue;
    for (size_t k = 0; k < c->size(); ++k) {
      json p;
      if (!s.to_chat((*c)[k], "", p)) continue;
      const std::string text = marked["messages"][i]["content"][k]["text"].get<std::string>();
      (*c)[k] = {{"type", std::string(s.list) == "input" ? "input_text" : "text"}, {"text", text}};
    }
  }
  return out;
}

size_t count_markers(const std::string& text) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(kMediaMarker, at)) != std::string::npos;
       at += kMediaMarker.size())
    ++n;
  return n;
}

}  // namespace

json anthropic_with_media_markers(MediaService& media, const json& body, ImageList& images) {
  static const Shape s{"messages", "source", anthropic_part};
  return with_markers(media, body, s, images, nullptr);
}

json responses_with_media_markers(MediaService& media, const json& body, ImageList& images,
                                  std::vector<ImageSource>* sources) {
  static const Shape s{"input", "image_url", responses_part};
  return with_markers(media, body, s, images, sources);
}

void attach_images(std::vector<Message>& messages, ImageList images,
                   std::vector<ImageSource> sources) {
  const bool with_sources = sources.size() == images.size();
  size_t next = 0;
  for (Message& m : messages) {
    const size_t n = count_markers(m.content);
    if (n == 0 || !m.images.empty()) continue;
    if (next + n > images.size()) break;
    const auto from = std::ptrdiff_t(next), to = std::ptrdiff_t(next + n);
    m.images.assign(images.begin() + from, images.begin() + to);
    if (with_sources) m.image_sources.assign(sources.begin() + from, sources.begin() + to);
    next += n;
  }
  size_t marked = 0, have = 0;
  for (const Message& m : messages) marked += count_markers(m.content), have += m.images.size();
  if (next != images.size() || marked != have)
    throw ApiError::bad_request(
        "The input's media markers (" + std::string(kMediaMarker) + ") do not match its images.",
        "input", "invalid_value");
}

}  // namespace tern::server
