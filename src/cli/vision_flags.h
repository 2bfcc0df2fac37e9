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
#include "tern/vision/embedding_source.h"

namespace tern::cli {

// Reads and decodes an image file; throws IoError / vision::ImageError.
std::shared_ptr<const vision::Image> load_image_file(const std::string& path);

class VisionSide {
 public:
  // Loads the projector and checks it against the engine's text model
  // (InvalidArgument naming the mismatch). The engine must outlive it.
  VisionSide(const std::string& mmproj_path, Engine& engine);

  MediaPrompt build(std::span<const TextSegment> text, bool add_bos,
                    std::span<const std::shared_ptr<const vision::Image>> images) const {
    return prompter_->build(text, add_bos, images, source_);
  }

 private:
  vision::VisionEncoder encoder_;
  std::unique_ptr<VisionPrompter> prompter_;
  std::shared_ptr<vision::EmbeddingSource> source_;
};

}  // namespace tern::cli
