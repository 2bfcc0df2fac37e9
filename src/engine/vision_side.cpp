#include "tern/engine/vision_side.h"

#include "tern/core/error.h"
#include "tern/core/log.h"

namespace tern {

VisionSide::VisionSide(const std::string& mmproj_path, Engine& engine,
                       vision::EmbeddingCache* cache)
    : encoder_(vision::VisionEncoder::load(mmproj_path)) {
  try {
    prompter_ =
        std::make_unique<VisionPrompter>(encoder_, engine.tokenizer(), engine.config().d_model);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(mmproj_path + ": " + e.what());
  }
  if (cache) {
    source_ = std::make_shared<vision::CachedSource>(*cache, encoder_, engine.pool(),
                                                     vision::projector_fingerprint(mmproj_path));
  } else {
    source_ = std::make_shared<vision::EncoderSource>(encoder_, engine.pool());
  }
  log::get("vision")->info("{}: {} projector, {} rows per tile", mmproj_path,
                           vision::projector_name(encoder_.config().projector),
                           encoder_.tokens_per_tile());
}

}  // namespace tern
