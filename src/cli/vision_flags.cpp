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

std::shared_ptr<const vision::AudioClip> load_audio_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError("cannot open audio " + path);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f), {}};
  vision::MediaPolicy policy;
  policy.max_bytes = bytes.size();  // a local file: its size is the user's choice
  try {
    return std::make_shared<const vision::AudioClip>(
        vision::decode_audio(bytes, vision::AudioOptions{}, policy));
  } catch (const vision::MediaError& e) {
    throw vision::MediaError(e.kind(), path + ": " + e.what());
  }
}

}  // namespace tern::cli
