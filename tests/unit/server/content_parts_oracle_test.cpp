// A user message of mixed text and image parts becomes the prompt llama-server
// renders for it (tests/fixtures/vision/content_parts_prompts.json: text parts
// joined with "\n", nothing around a media marker), through every API shape
// that carries images: chat completions (and the WebSocket, which parses the
// same way), Responses and Anthropic Messages, each with a real image decoded
// by the MediaService.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tern/server/anthropic_messages.h"
#include "tern/server/media_parts.h"
#include "tern/server/media_translate.h"
#include "tern/server/responses_api.h"
#include "tern/tokenizer/chat_template.h"
#include "testutil.h"

namespace tern::server {
namespace {

using json = nlohmann::json;

// A 2x2 RGB PNG.
const std::string kPngBase64 =
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGM4oREFRAwQCgAl3gUpEzqvXwAAAABJRU5Er"
    "kJggg==";

json load_fixture(const std::string& name) {
  std::ifstream in(test::fixture_path(name));
  if (!in) throw std::runtime_error("missing fixture " + name);
  return json::parse(in);
}

// The fixture's chat content with each image part in `shape`'s own form.
json content_as(const json& chat_parts, const std::string& shape) {
  json out = json::array();
  for (const json& p : chat_parts) {
    if (p.at("type") == "text") {
      out.push_back({{"type", shape == "responses" ? "input_text" : "text"}, {"text", p["text"]}});
    } else if (shape == "chat") {
      out.push_back(
          {{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + kPngBase64}}}});
    } else if (shape == "responses") {
      out.push_back(
          {{"type", "input_image"}, {"image_url", "data:image/png;base64," + kPngBase64}});
    } else {
      out.push_back(
          {{"type", "image"},
           {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", kPngBase64}}}});
    }
  }
  return out;
}

// The request's messages and its images, parsed as the server parses `shape`.
std::vector<Message> parse_shape(MediaService& media, const json& content, const std::string& shape,
                                 size_t* n_images) {
  const json msg = {{"role", "user"}, {"content", content}};
  ImageList images;
  GenerationRequest g;
  if (shape == "chat") {
    g = parse_chat_with_media(media, json{{"messages", {msg}}}, {}, UnknownFields::Ignore);
    images = g.images;
  } else if (shape == "responses") {
    const json body = responses_with_media_markers(media, json{{"input", {msg}}}, images);
    g = parse_responses_request(body, [](const std::string&) { return std::nullopt; }).g;
  } else {
    const json body = anthropic_with_media_markers(
        media, json{{"model", "m"}, {"max_tokens", 4}, {"messages", {msg}}}, images);
    g = parse_anthropic_request(body);
  }
  *n_images = images.size();
  return g.messages;
}

TEST(ContentPartsOracle, EveryApiShapeRendersLlamaServersPrompt) {
  const json fixture = load_fixture("vision/content_parts_prompts.json");
  const json golden = load_fixture("tokenizer_golden.json");
  const ChatTemplate tmpl =
      ChatTemplate::from_string(golden.at("chat")
                                    .at("templates")
                                    .at(fixture.at("template").get<std::string>())
                                    .get<std::string>());
  MediaService media(MediaOptions{});
  media.set_vision(true);
  size_t checked = 0;
  for (const json& c : fixture.at("cases")) {
    size_t want_images = 0;
    for (const json& p : c.at("content")) want_images += p.at("type") == "image_url";
    for (const std::string shape : {"chat", "responses", "anthropic"}) {
      SCOPED_TRACE(c.at("name").get<std::string>() + " via " + shape);
      size_t n_images = 0;
      const std::vector<Message> msgs =
          parse_shape(media, content_as(c.at("content"), shape), shape, &n_images);
      ASSERT_EQ(msgs.size(), 1u);
      EXPECT_EQ(msgs[0].content, c.at("user_content").get<std::string>());
      EXPECT_EQ(n_images, want_images);
      const std::vector<ChatMessage> chat = {{msgs[0].role, msgs[0].content, {}}};
      EXPECT_EQ(tmpl.apply(chat, /*add_generation_prompt=*/true),
                c.at("expected").get<std::string>());
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * fixture.at("cases").size());
}

}  // namespace
}  // namespace tern::server
