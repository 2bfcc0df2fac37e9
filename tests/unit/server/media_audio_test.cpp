// Audio parts of chat messages: their shapes (errors naming the field), a
// WAV clip decoded with its pcm_hash and its samples charged to the memory
// budget, the duration limit, the audio marker in the body, and a server
// without an audio encoder refusing audio as model_not_multimodal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tern/core/memory_budget.h"
#include "tern/engine/media_prompt.h"
#include "tern/server/media_parts.h"
#include "tern/vision/audio.h"

namespace tern::server {
namespace {

using json = nlohmann::json;

// A 16-bit mono 16 kHz WAV of a tone, as base64.
std::string wav_base64(double seconds) {
  const int n = int(seconds * 16000);
  std::vector<uint8_t> b;
  auto u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
  };
  auto u16 = [&](uint16_t v) { b.push_back(uint8_t(v)), b.push_back(uint8_t(v >> 8)); };
  auto tag = [&](const char* t) { b.insert(b.end(), t, t + 4); };
  tag("RIFF"), u32(36 + 2 * n), tag("WAVE"), tag("fmt "), u32(16), u16(1), u16(1), u32(16000),
      u32(32000), u16(2), u16(16), tag("data"), u32(2 * n);
  for (int i = 0; i < n; ++i) u16(uint16_t(int16_t(8000 * std::sin(i * 0.17))));
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < b.size(); i += 3) {
    const size_t m = std::min<size_t>(3, b.size() - i);
    const uint32_t v = uint32_t(b[i]) << 16 | (m > 1 ? uint32_t(b[i + 1]) << 8 : 0) |
                       (m > 2 ? uint32_t(b[i + 2]) : 0);
    for (size_t c = 0; c < 4; ++c) out += c <= m ? k[(v >> (18 - 6 * c)) & 63] : '=';
  }
  return out;
}

json audio_body(const json& part) {
  return json{{"messages",
               json::array({json{
                   {"role", "user"},
                   {"content", json::array({part, json{{"type", "text"}, {"text", "What?"}}})}}})}};
}

json input_audio(const std::string& data, const std::string& format = "wav") {
  return json{{"type", "input_audio"}, {"input_audio", {{"data", data}, {"format", format}}}};
}

template <typename F>
ApiError error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "", "");
}

TEST(MediaAudio, PartsParseIntoAudioItems) {
  MessageMedia m = parse_message_media(audio_body(input_audio("AAAA", "flac")));
  ASSERT_EQ(m.items.size(), 1u);
  EXPECT_EQ(m.items[0].kind, MediaItem::Kind::Audio);
  EXPECT_EQ(m.items[0].urls[0], "data:audio/flac;base64,AAAA");
  EXPECT_EQ(m.items[0].source_param, "messages[0].content[0].input_audio.data");
  m = parse_message_media(
      audio_body(json{{"type", "audio_url"}, {"audio_url", {{"url", "clips/a.wav"}}}}));
  ASSERT_EQ(m.items.size(), 1u);
  EXPECT_EQ(m.items[0].source_param, "messages[0].content[0].audio_url.url");
}

TEST(MediaAudio, BadShapesNameTheField) {
  const struct {
    json part;
    const char* param;
  } cases[] = {
      {input_audio("AAAA", "aiff"), "messages[0].content[0].input_audio.format"},
      {json{{"type", "input_audio"}, {"input_audio", {{"format", "wav"}}}},
       "messages[0].content[0].input_audio.data"},
      {json{{"type", "input_audio"}, {"input_audio", "x"}}, "messages[0].content[0].input_audio"},
      {json{{"type", "audio_url"}, {"audio_url", {{"url", ""}}}},
       "messages[0].content[0].audio_url.url"},
  };
  for (const auto& c : cases) {
    const ApiError e = error_of([&] { parse_message_media(audio_body(c.part)); });
    EXPECT_EQ(e.status(), 400) << c.part.dump();
    EXPECT_EQ(e.param(), c.param) << c.part.dump();
  }
}

TEST(MediaAudio, AClipLoadsWithItsHashAndCharge) {
  if (!vision::audio_supported()) GTEST_SKIP() << "built without FFmpeg";
  MemoryBudget budget(size_t(64) << 20);
  MediaOptions o;
  o.budget = &budget;
  MediaService svc(o);
  svc.set_audio(true);
  MessageMedia m = svc.check_chat_request(audio_body(input_audio(wav_base64(0.5))));
  ASSERT_EQ(m.items.size(), 1u);
  const MediaItem& it = m.items[0];
  EXPECT_EQ(it.audio.samples.size(), 8000u);
  EXPECT_EQ(it.hashes.at(0), vision::pcm_hash(it.audio));
  EXPECT_EQ(budget.used(MemPool::MmPixels), 8000 * sizeof(float));
  // The body's part becomes one audio marker; the clip keeps the charge.
  ImageList images;
  AudioList audio;
  const json marked =
      with_media_markers(audio_body(input_audio(wav_base64(0.5))), m, images, audio);
  EXPECT_EQ(marked["messages"][0]["content"][0]["text"], std::string(kAudioMarker));
  ASSERT_EQ(audio.size(), 1u);
  EXPECT_TRUE(images.empty());
  EXPECT_EQ(budget.used(MemPool::MmPixels), 8000 * sizeof(float));
  audio.clear();
  EXPECT_EQ(budget.used(MemPool::MmPixels), 0u);
  EXPECT_EQ(svc.counters().audio.load(), 1u);
}

TEST(MediaAudio, LimitsAndMissingEncoderAre400s) {
  if (!vision::audio_supported()) GTEST_SKIP() << "built without FFmpeg";
  MediaOptions o;
  o.max_audio_seconds = 1;
  MediaService svc(o);
  svc.set_audio(true);
  ApiError e = error_of([&] { svc.check_chat_request(audio_body(input_audio(wav_base64(2)))); });
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "media_too_large");
  EXPECT_EQ(e.param(), "messages[0].content[0].input_audio.data");
  e = error_of([&] { svc.check_chat_request(audio_body(input_audio("UklGRgAAAABXQVZF"))); });
  EXPECT_EQ(e.code(), "invalid_audio");
  MediaService no_audio(MediaOptions{});
  no_audio.set_vision(true);  // images, but no audio encoder
  e = error_of([&] { no_audio.check_chat_request(audio_body(input_audio(wav_base64(0.2)))); });
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "model_not_multimodal");
  EXPECT_NE(std::string(e.what()).find("no audio encoder"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace tern::server
