#include "tern/server/media_parts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include <stb_image_write.h>
#pragma GCC diagnostic pop

namespace tern::server {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string png_data_url(int w, int h, uint8_t v) {
  std::vector<uint8_t> rgb(size_t(w) * h * 3, v), out;
  stbi_write_png_to_func(
      [](void* ctx, void* data, int n) {
        auto* o = static_cast<std::vector<uint8_t>*>(ctx);
        o->insert(o->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + n);
      },
      &out, w, h, 3, rgb.data(), w * 3);
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string b64;
  for (size_t i = 0; i < out.size(); i += 3) {
    const size_t n = std::min<size_t>(3, out.size() - i);
    uint32_t v3 =
        uint32_t(out[i]) << 16 | (n > 1 ? uint32_t(out[i + 1]) << 8 : 0) | (n > 2 ? out[i + 2] : 0);
    for (size_t c = 0; c < 4; ++c) b64 += c <= n ? k[(v3 >> (18 - 6 * c)) & 63] : '=';
  }
  return "data:image/png;base64," + b64;
}

json user(json content) {
  return json{{"messages", json::array({json{{"role", "user"}, {"content", content}}})}};
}

json image_part(const std::string& url) {
  return json{{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

// The ApiError `f` throws (status 0 if none).
template <typename F>
ApiError error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "", "");
}

TEST(MediaParts, ContentIsASequenceOfTextAndMedia) {
  const json body =
      user(json::array({json{{"type", "text"}, {"text", "look"}}, image_part("a.png"),
                        json{{"type", "video_url"},
                             {"video_url", {{"url", "c.mp4"}, {"fps", 2}, {"max_frames", 4}}}},
                        json{{"type", "video"}, {"frames", {"f1.png", json{{"url", "f2.png"}}}}},
                        json{{"type", "text"}, {"text", "and this"}}}));
  const MessageMedia m = parse_message_media(body);
  ASSERT_EQ(m.items.size(), 3u);
  ASSERT_EQ(m.messages.size(), 1u);
  const auto& p = m.messages[0];
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[0].text, "look");
  EXPECT_EQ(p[1].media, 0);
  EXPECT_EQ(p[2].media, 1);
  EXPECT_EQ(p[3].media, 2);
  EXPECT_EQ(p[4].text, "and this");
  EXPECT_EQ(m.items[0].param, "messages[0].content[1]");
  EXPECT_EQ(m.items[1].kind, MediaItem::Kind::VideoUrl);
  EXPECT_EQ(m.items[1].fps, 2);
  EXPECT_EQ(m.items[1].max_frames, 4);
  EXPECT_EQ(m.items[2].urls, (std::vector<std::string>{"f1.png", "f2.png"}));
  EXPECT_FALSE(parse_message_media(user("plain text")).any());
  EXPECT_FALSE(parse_message_media(json{{"prompt", "x"}}).any());
}

TEST(MediaParts, BadShapesNameTheParam) {
  const std::pair<json, std::string> cases[] = {
      {json{{"type", "image_url"}}, "messages[0].content[0].image_url"},
      {json{{"type", "image_url"}, {"image_url", 5}}, "messages[0].content[0].image_url"},
      {json{{"type", "image_url"}, {"image_url", json::object()}},
       "messages[0].content[0].image_url.url"},
      {json{{"type", "image_url"}, {"image_url", {{"url", "a"}, {"detail", "x"}}}},
       "messages[0].content[0].image_url.detail"},
      {json{{"type", "video_url"}, {"video_url", {{"url", "a"}, {"max_frames", 0}}}},
       "messages[0].content[0].video_url.max_frames"},
      {json{{"type", "video"}, {"frames", json::array()}}, "messages[0].content[0].frames"},
  };
  for (const auto& [part, param] : cases) {
    const ApiError e = error_of([&] { parse_message_media(user(json::array({part}))); });
    EXPECT_EQ(e.status(), 400) << part;
    EXPECT_EQ(e.param(), param) << part;
  }
}

TEST(MediaParts, LoadsAndHashesThenRefusesWithoutAProjector) {
  MediaService svc(MediaOptions{});
  const std::string url = png_data_url(6, 4, 200);
  MessageMedia m = parse_message_media(user(json::array({image_part(url), image_part(url)})));
  svc.load(m);
  ASSERT_EQ(m.items[0].frames.size(), 1u);
  EXPECT_EQ(m.items[0].frames[0].width, 6);
  EXPECT_EQ(m.items[0].hashes, m.items[1].hashes);  // the same picture twice
  EXPECT_EQ(svc.counters().images.load(), 2u);

  const ApiError e =
      error_of([&] { svc.check_chat_request(user(json::array({image_part(url)}))); });
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "model_not_multimodal");
  EXPECT_NE(std::string(e.what()).find("--mmproj"), std::string::npos);
  EXPECT_NO_THROW(svc.check_chat_request(user("no media")));
  EXPECT_FALSE(svc.vision());
}

TEST(MediaParts, MediaErrorsBecomeStatusesAndCodes) {
  const fs::path dir = fs::temp_directory_path() / ("tern-media-parts-" + std::to_string(getpid()));
  fs::create_directories(dir / "in");
  std::ofstream(dir / "in" / "notes.txt") << "hello";
  MediaOptions o;
  o.media_dir = (dir / "in").string();
  o.max_image_pixels = 100;
  o.max_items = 2;
  MediaService svc(o);
  auto check = [&](const json& part, int status, const std::string& code) {
    MessageMedia m = parse_message_media(user(json::array({part})));
    const ApiError e = error_of([&] { svc.load(m); });
    EXPECT_EQ(e.status(), status) << part;
    EXPECT_EQ(e.code(), code) << part;
  };
  check(image_part("../x.png"), 403, "media_forbidden");
  check(image_part("https://example.com/x.png"), 403, "media_forbidden");
  check(image_part("notes.txt"), 400, "invalid_image");
  check(image_part("data:image/png;base64,@@@@"), 400, "invalid_image");
  check(image_part(png_data_url(20, 20, 1)), 400, "media_too_large");
  check(image_part("gopher://x"), 400, "unsupported_media");
  check(json{{"type", "video_url"}, {"video_url", {{"url", "notes.txt"}}}}, 400, "invalid_video");
  check(json{{"type", "video"},
             {"frames", {png_data_url(2, 2, 1), png_data_url(2, 2, 2), png_data_url(2, 2, 3)}}},
        400, "too_many_media");
  EXPECT_GE(svc.counters().refused.load(), 6u);
  const std::string metrics = svc.render_metrics();
  for (const char* name : {"tern_media_refused_total ", "tern_mm_cache_hits_total{tier=\"flash\"}",
                           "tern_mm_cache_bytes{tier=\"dram\"} 0"})
    EXPECT_NE(metrics.find(name), std::string::npos) << name;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tern::server
