#include "json_fields.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <set>

#include "tern/core/log.h"
#include "tern/engine/media_prompt.h"

namespace tern::server {

bool note_unknown_field(const std::string& name) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard lock(mu);
  return seen.insert(name).second;
}

namespace fields {

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

void wrong_type(const std::string& field, const char* expected, const json& v) {
  throw ApiError::bad_request("Invalid type for '" + field + "': expected " + expected +
                                  ", but got " + type_name(v) + " instead.",
                              field, "invalid_type");
}

void bad_value(const std::string& field, const std::string& why) {
  throw ApiError::bad_request("Invalid value for '" + field + "': " + why, field, "invalid_value");
}

void unsupported(const std::string& field, const std::string& why) {
  throw ApiError::bad_request("Unsupported value for '" + field + "': " + why, field,
                              "unsupported_value");
}

void missing(const std::string& field) {
  throw ApiError::bad_request("Missing required parameter: '" + field + "'.", field,
                              "missing_required_parameter");
}

std::string quoted(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "'";
  size_t n = std::min<size_t>(s.size(), 64);
  while (n < s.size() && n > 0 && (uint8_t(s[n]) & 0xC0) == 0x80) --n;  // whole characters
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out + (s.size() > n ? "...'" : "'");
}

const json* field(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}

bool get_number(const json& o, const char* key, double& out) {
  const json* v = field(o, key);
  if (!v) return false;
  if (!v->is_number()) wrong_type(key, "a number", *v);
  out = v->get<double>();
  if (!std::isfinite(out)) bad_value(key, "must be a finite number.");
  return true;
}

bool get_int(const json& o, const char* key, int64_t& out) {
  const json* v = field(o, key);
  if (!v) return false;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      bad_value(key, "integer is too large.");
    out = v->get<int64_t>();
    return true;
  }
  // 3.0 is an integer in JSON's eyes for many clients.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      out = int64_t(d);
      return true;
    }
  }
  wrong_type(key, "an integer", *v);
}

bool get_bool(const json& o, const char* key, bool& out) {
  const json* v = field(o, key);
  if (!v) return false;
  if (!v->is_boolean()) wrong_type(key, "a boolean", *v);
  out = v->get<bool>();
  return true;
}

bool get_string(const json& o, const char* key, std::string& out) {
  const json* v = field(o, key);
  if (!v) return false;
  if (!v->is_string()) wrong_type(key, "a string", *v);
  out = v->get<std::string>();
  return true;
}

void check_range(const char* key, double v, double lo, double hi) {
  if (v < lo || v > hi) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%g is out of range. Expected a value between %g and %g.", v, lo,
                  hi);
    bad_value(key, buf);
  }
}

bool is_media_part(std::string_view text) {
  if (text.empty()) return false;
  while (!text.empty()) {
    if (text.starts_with(kMediaMarker))
      text.remove_prefix(kMediaMarker.size());
    else if (text.starts_with(kAudioMarker))
      text.remove_prefix(kAudioMarker.size());
    else
      return false;
  }
  return true;
}

std::string text_content(const json& c, const std::string& where,
                         std::initializer_list<const char*> text_types) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) wrong_type(where, "a string or an array of content parts", c);
  std::string text;
  bool after_media = false;
  for (size_t k = 0; k < c.size(); ++k) {
    const json& part = c[k];
    const std::string pw = where + "[" + std::to_string(k) + "]";
    if (!part.is_object()) wrong_type(pw, "an object", part);
    std::string type;
    if (!get_string(part, "type", type)) missing(pw + ".type");
    if (std::none_of(text_types.begin(), text_types.end(),
                     [&](const char* t) { return type == t; }))
      unsupported(pw + ".type", "content parts of type '" + type + "' are not supported; only '" +
                                    *text_types.begin() + "' is.");
    const json* t = field(part, "text");
    if (!t || !t->is_string()) wrong_type(pw + ".text", "a string", t ? *t : json());
    // llama.cpp's join (common_chat_msg::to_json_oaicompat): text parts are
    // separated by "\n", a media part touches its neighbours.
    const std::string& piece = t->get_ref<const std::string&>();
    const bool media = is_media_part(piece);
    if (!media && !after_media && !text.empty()) text += "\n";
    text += piece;
    after_media = media;
  }
  return text;
}

void check_fields(const json& obj, std::string_view where, std::initializer_list<const char*> known,
                  UnknownFields policy, const std::vector<std::string>& extra) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& k = it.key();
    if (std::any_of(known.begin(), known.end(), [&](const char* s) { return k == s; })) continue;
    if (std::find(extra.begin(), extra.end(), k) != extra.end()) continue;
    const std::string name = std::string(where) + k;
    if (policy == UnknownFields::Refuse)
      throw ApiError::bad_request("Unrecognized request argument supplied: " + name, name,
                                  "unknown_parameter");
    if (note_unknown_field(name))
      tern::log::get("server")->warn(
          "ignoring unknown request field '{}' (logged once; --strict-fields refuses it)", name);
  }
}

}  // namespace fields
}  // namespace tern::server
