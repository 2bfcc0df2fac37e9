#pragma once
// Helpers shared by unit tests: where the source tree, fixtures and default
// model live. Tests that need the real model skip (GTEST_SKIP) when it is absent.
#include <ctime>
#include <span>
#include <string>

namespace tern::test {

std::string source_dir();
std::string fixture_path(const std::string& name);  // tests/fixtures/<name>
std::string default_model_path();                   // models/SmolLM2-135M-Instruct.Q4_1.gguf
std::string gemma3_model_path();  // models/gemma-3-270m-it-Q4_K_M.gguf ($TERN_GEMMA3_MODEL)
bool file_exists(const std::string& path);
std::string temp_path(const std::string& name);  // a fresh path in a per-process temp dir
std::string read_file(const std::string& path);  // the whole file ("" if unreadable)
// The cosine of the angle between two vectors of the same length (in double).
double cosine(std::span<const float> a, std::span<const float> b);
// A UTC instant written as `fmt` (std::get_time's), e.g. "%Y-%m-%dT%H:%M:%S".
std::time_t utc_time(const std::string& text, const char* fmt);

}  // namespace tern::test
