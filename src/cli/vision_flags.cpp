#include "vision_flags.h"

#include <fstream>
#include <iterator>

#include "tern/core/error.h"
#include "tern/core/log.h"

namespace tern::cli {

std::shared_ptr<const vision::Image> load_image_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError("cannot open image " + path);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f), {}};
  try {
    return std::make_shared<const vision::Image>(vision::decode_image(bytes));
  } catch (const vision::ImageError& e) {
    throw vision::ImageError(path + ": " + e.what());
  }
}

VisionSide::VisionSide(const std::string& mmproj_path, Engine& engine)
    : encoder_(vision::VisionEncoder::load(mmproj_path)) {
  try {
    prompter_ =
        std::make_unique<VisionPrompter>(encoder_, engine.tokenizer(), engine.config().d_model);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(mmproj_path + ": " + e.what());
  }
  source_ = std::make_shared<vision::EncoderSource>(encoder_, engine.pool());
  log::get("vision")->info("{}: {} projector, {} rows per tile", mmproj_path,
                           vision::projector_name(encoder_.config().projector),
                           encoder_.tokens_per_tile());
}

}  // namespace tern::cli
