#pragma once
// Images in the API shapes other than chat completions. Anthropic Messages
// image blocks and Responses input_image parts are checked and loaded by the
// same MediaService as chat's image_url parts (same sources, limits, pixel
// hashes and errors), then replaced in place by text parts holding one media
// marker per frame, so each API's own parser sees only text. The frames come
// back in marker order.
//
//   Anthropic: {"type": "image", "source": {"type": "base64", "media_type":
//              "image/png"|"image/jpeg"|"image/gif"|"image/webp", "data": ...}}
//              or {"source": {"type": "url", "url": ...}}, in user messages.
//   Responses: {"type": "input_image", "image_url": "<data:/file/http(s) URL>",
//              "detail": "auto"|"low"|"high"} in input messages.
//              {"type": "input_audio", "input_audio": {"data": base64,
//              "format": "wav"|...}} (chat's audio part; Anthropic has none).
// Errors are ApiErrors naming the block (e.g. messages[0].content[1].source);
// a model without --mmproj answers 400 model_not_multimodal.
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "tern/server/media_parts.h"

namespace tern::server {

nlohmann::json anthropic_with_media_markers(MediaService& media, const nlohmann::json& body,
                                            ImageList& images);
// `sources` (when given) gets each image's URL and pixel hash, in order.
nlohmann::json responses_with_media_markers(MediaService& media, const nlohmann::json& body,
                                            ImageList& images,
                                            std::vector<ImageSource>* sources = nullptr);
// With audio too: Responses input_audio parts ({"type": "input_audio",
// "input_audio": {"data", "format"}}, chat's shape) become audio markers,
// their clips (and sources: URL and pcm_hash) go to `audio` (audio_sources).
nlohmann::json responses_with_media_markers(MediaService& media, const nlohmann::json& body,
                                            ImageList& images, std::vector<ImageSource>* sources,
                                            AudioList& audio,
                                            std::vector<ImageSource>* audio_sources);

// Gives each message whose content holds media markers but no images yet its
// frames from `images`, in order (a Responses conversation keeps them, so a
// continuation shows the same pictures), and their `sources` when given (one
// per image). Throws ApiError when the markers and the frames do not match.
void attach_images(std::vector<Message>& messages, ImageList images,
                   std::vector<ImageSource> sources = {});
// The same for audio clips and their audio markers.
void attach_audio(std::vector<Message>& messages, AudioList audio,
                  std::vector<ImageSource> sources = {});

}  // namespace tern::server
