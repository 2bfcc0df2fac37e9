#pragma once
// --mmproj and --image for the generating commands: the vision projector
// loaded beside the text model (checked against it), images read from files,
// and prompts built with them (engine/media_prompt.h).
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tern/engine/engine.h"
#include "tern/engine/media_prompt.h"
#include "tern/engine/vision_side.h"
#include "tern/vision/embedding_source.h"

namespace tern::cli {

// Reads and decodes an image file; throws IoError / vision::ImageError.
std::shared_ptr<const vision::Image> load_image_file(const std::string& path);

using tern::VisionSide;  // engine/vision_side.h

}  // namespace tern::cli
