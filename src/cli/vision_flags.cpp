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

}  // namespace tern::cli
