// Writes a seed corpus for one of the fuzz targets (fuzz_gguf has its own,
// fuzz_gguf_seeds). Usage: fuzz_seeds <target> <output-dir>, where target is
// image, video, audio, mmproj, lora, kv_snapshot, embedding_cache, json_schema or
// chat_template, jinja or ugm.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "fuzz_util.h"
#include "seeds.h"
#include "tern/core/error.h"

namespace tern::fuzz {

void save_seed(const std::string& dir, const std::string& name, std::span<const uint8_t> bytes) {
  const std::string path = dir + "/" + name;
  write_file(path, bytes);
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
}

void save_seed(const std::string& dir, const std::string& name, std::string_view text) {
  save_seed(dir, name,
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(path + ": cannot read it");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

}  // namespace tern::fuzz

int main(int argc, char** argv) {
  using Writer = void (*)(const std::string&);
  const std::map<std::string, Writer> writers = {
      {"image", tern::fuzz::image_seeds},
      {"video", tern::fuzz::video_seeds},
      {"audio", tern::fuzz::audio_seeds},
      {"mmproj", tern::fuzz::mmproj_seeds},
      {"lora", tern::fuzz::lora_seeds},
      {"kv_snapshot", tern::fuzz::kv_snapshot_seeds},
      {"embedding_cache", tern::fuzz::embedding_cache_seeds},
      {"json_schema", tern::fuzz::json_schema_seeds},
      {"chat_template", tern::fuzz::chat_template_seeds},
      {"jinja", tern::fuzz::jinja_seeds},
      {"ugm", tern::fuzz::ugm_seeds},
  };
  const auto it = argc == 3 ? writers.find(argv[1]) : writers.end();
  if (it == writers.end()) {
    std::fprintf(stderr, "usage: %s <target> <output-dir>; targets:", argv[0]);
    for (const auto& [name, w] : writers) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  try {
    tern::fuzz::quiet_logs();
    std::filesystem::create_directories(argv[2]);
    it->second(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
