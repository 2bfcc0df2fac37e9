#pragma once
// --mmproj, --image and --audio for the generating commands: the projector
// loaded beside the text model (checked against it), images and audio read
// from files,
// and prompts built with them (engine/media_prompt.h).
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tern/engine/engine.h"
#include "tern/engine/media_prompt.h"
#include "tern/engine/media_side.h"
#include "tern/vision/embedding_source.h"

namespace tern::cli {

// Reads and decodes an image file; throws IoError / vision::ImageError.
std::shared_ptr<const vision::Image> load_image_file(const std::string& path);
// Reads and decodes an audio file (16 kHz mono); throws IoError /
// vision::MediaError naming the file.
std::shared_ptr<const vision::AudioClip> load_audio_file(const std::string& path);

using tern::MediaSide;  // engine/media_side.h

}  // namespace tern::cli
