#pragma once
// A vision projector (llama.cpp mmproj) loaded beside the engine's text
// model: checked against it, and prompts with images built for it
// (media_prompt.h). Used by `tern run/chat --mmproj` and `tern serve
// --mmproj`; with an EmbeddingCache, an image's rows are encoded once per
// (pixel hash, projector, preprocessing) and found again after that.
#include <memory>
#include <span>
#include <string>

#include "tern/engine/engine.h"
#include "tern/engine/media_prompt.h"
#include "tern/vision/embedding_cache.h"
#include "tern/vision/embedding_source.h"

namespace tern {

class VisionSide {
 public:
  // Loads the projector and checks it against the engine's text model
  // (InvalidArgument naming the file and the mismatch). The engine and the
  // cache (nullptr: encode every time) must outlive it.
  VisionSide(const std::string& mmproj_path, Engine& engine,
             vision::EmbeddingCache* cache = nullptr);

  MediaPrompt build(std::span<const TextSegment> text, bool add_bos,
                    std::span<const std::shared_ptr<const vision::Image>> images) const {
    return prompter_->build(text, add_bos, images, source_);
  }
  const vision::VisionEncoder& encoder() const { return encoder_; }

 private:
  vision::VisionEncoder encoder_;
  std::unique_ptr<VisionPrompter> prompter_;
  std::shared_ptr<vision::EmbeddingSource> source_;
};

}  // namespace tern
