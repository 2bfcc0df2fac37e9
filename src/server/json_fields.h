#pragma once
// Reading fields of a JSON request body, shared by every API's parser: typed
// getters that name the field in their errors (OpenAI's wording), and the
// unknown-field policy.
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tern/server/api_error.h"
#include "tern/server/openai_request.h"

namespace tern::server::fields {

using json = nlohmann::json;

const char* type_name(const json& v);  // "a string", "an integer", ...

[[noreturn]] void wrong_type(const std::string& field, const char* expected, const json& v);
[[noreturn]] void bad_value(const std::string& field, const std::string& why);
[[noreturn]] void unsupported(const std::string& field, const std::string& why);
[[noreturn]] void missing(const std::string& field);

// `s` in single quotes for an error message, control bytes (a NUL among
// them, which would end the message there) written as \xNN, at most 64 bytes.
std::string quoted(std::string_view s);

// The value of `key`, or nullptr when it is absent or null.
const json* field(const json& o, const char* key);

// Readers: false when the key is absent or null; a wrong type throws.
bool get_number(const json& o, const char* key, double& out);  // finite
bool get_int(const json& o, const char* key, int64_t& out);    // 3.0 counts as 3
bool get_bool(const json& o, const char* key, bool& out);
bool get_string(const json& o, const char* key, std::string& out);

// A content part that media_parts.h's with_media_markers made of an image, a
// video or an audio clip: one or more media markers (engine/media_prompt.h's
// kMediaMarker, kAudioMarker) and nothing else.
// A client's text part holding only markers counts too: tern places media at
// every marker in the text, so such a part stands where a picture goes.
bool is_media_part(std::string_view text);

// Throws invalid_value unless lo <= v <= hi.
void check_range(const char* key, double v, double lo, double hi);

// Content given as a string, or as an array of parts {"type": t, "text": ...}
// with t one of `text_types`; any other part type is refused
// (unsupported_value). `where` names the content in errors. The parts are
// joined as llama.cpp joins them: text parts with "\n" between them, a media
// part (an image or video already turned into its markers, is_media_part)
// with nothing before or after it: [text, image] is "Describe.<__media__>".
// Every API shape that carries images (chat, Responses, Messages, the
// WebSocket) reaches its prompt through this one join.
std::string text_content(const json& c, const std::string& where,
                         std::initializer_list<const char*> text_types);

// The unknown-field policy. Every key of `obj` not in `known` or `extra` is
// unknown: with UnknownFields::Refuse a 400 (unknown_parameter) naming
// `where` + key; otherwise it is ignored, and the first time the process
// sees that name a warning is logged.
void check_fields(const json& obj, std::string_view where, std::initializer_list<const char*> known,
                  UnknownFields policy, const std::vector<std::string>& extra = {});

}  // namespace tern::server::fields
