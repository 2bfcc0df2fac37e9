#pragma once
// The seed writers behind `fuzz_seeds <target> <dir>` (make_fuzz_seeds.cpp):
// each writes a few small valid inputs for one fuzz target into `dir`.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern::fuzz {

// Writes dir/name and prints its size.
void save_seed(const std::string& dir, const std::string& name, std::span<const uint8_t> bytes);
void save_seed(const std::string& dir, const std::string& name, std::string_view text);
std::vector<uint8_t> read_bytes(const std::string& path);

void image_seeds(const std::string& dir);            // seeds_media.cpp
void video_seeds(const std::string& dir);            // seeds_media.cpp
void audio_seeds(const std::string& dir);            // seeds_media.cpp
void mmproj_seeds(const std::string& dir);           // seeds_files.cpp
void lora_seeds(const std::string& dir);             // seeds_files.cpp
void kv_snapshot_seeds(const std::string& dir);      // seeds_files.cpp
void embedding_cache_seeds(const std::string& dir);  // seeds_files.cpp
void json_schema_seeds(const std::string& dir);      // seeds_text.cpp
void chat_template_seeds(const std::string& dir);    // seeds_text.cpp
void jinja_seeds(const std::string& dir);            // seeds_text.cpp
void ugm_seeds(const std::string& dir);              // seeds_text.cpp

}  // namespace tern::fuzz
