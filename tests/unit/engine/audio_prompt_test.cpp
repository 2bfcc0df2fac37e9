// Audio in prompts: the markers cut the text in order (images at
// <__media__>, clips at <__audio__>, unmarked ones first), a clip becomes the
// encoder's begin text, n_output_tokens positions keyed by its pcm_hash and
// the end text, and an audio-only mmproj file loads as audio alone (images
// refused by name). The text model is the scheduler tests' tiny one; the
// projector a seeded tiny one of each audio type, as wide as it.
#include <gtest/gtest.h>

#include <string>

#include "../sched/tiny_engine.h"
#include "tern/core/error.h"
#include "tern/engine/engine.h"
#include "tern/engine/media_prompt.h"
#include "tern/engine/media_side.h"
#include "tern/vision/audio_mmproj_writer.h"
#include "testutil.h"

namespace tern {
namespace {

class AudioPromptTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine_ = Engine::load(sched::testutil::tiny_engine_options(4096, 2)).release();
  }
  static void TearDownTestSuite() { delete engine_; }

  static std::string mmproj(vision::AudioProjector type) {
    vision::AudioMmprojSpec spec = vision::audio_mmproj_preset(type, vision::MmprojShape::Tiny);
    spec.config.d_out = engine_->config().d_model;
    const std::string path = test::temp_path(
        "audio_prompt_" + std::string(vision::audio_projector_name(type)) + ".gguf");
    vision::write_audio_mmproj(spec, path);
    return path;
  }
  static std::shared_ptr<const vision::AudioClip> clip(double seconds, float v) {
    auto c = std::make_shared<vision::AudioClip>();
    c->sample_rate = 16000;
    c->samples.assign(size_t(seconds * 16000), v);
    return c;
  }
  static inline Engine* engine_ = nullptr;
};

TEST_F(AudioPromptTest, MarkersPlaceImagesAndClipsInOrder) {
  const Tokenizer& tok = engine_->tokenizer();
  const std::vector<TextSegment> text = {{"a<__audio__>b<__media__>c<__audio__>d", false}};
  std::string order;
  const MediaPrompt p =
      build_media_prompt(tok, text, /*add_bos=*/false, /*n_images=*/2, /*n_audio=*/3,
                         /*with_audio=*/true, [&](MediaPrompt&, bool audio, size_t k) {
                           order += (audio ? "A" : "I") + std::to_string(k);
                         });
  // The unmarked image and clip first, then the markers' in order.
  EXPECT_EQ(order, "I0A0A1I1A2");
  EXPECT_THROW(build_media_prompt(tok, text, false, 1, 1, true, [](MediaPrompt&, bool, size_t) {}),
               InvalidArgument);
  // Without audio the audio marker is plain text.
  order.clear();
  build_media_prompt(tok, text, false, 1, 0, /*with_audio=*/false,
                     [&](MediaPrompt&, bool audio, size_t k) {
                       order += (audio ? "A" : "I") + std::to_string(k);
                     });
  EXPECT_EQ(order, "I0");
}

TEST_F(AudioPromptTest, AClipIsItsRowsKeyedByItsSamples) {
  const MediaSide side(mmproj(vision::AudioProjector::Ultravox), *engine_);
  ASSERT_TRUE(side.has_audio());
  EXPECT_FALSE(side.has_vision());
  const auto a = clip(1.0, 0.1f), b = clip(1.0, 0.2f);
  const std::vector<TextSegment> text = {{"x<__audio__>y<__audio__>z", false}};
  const std::vector<std::shared_ptr<const vision::AudioClip>> clips = {a, b};
  const MediaPrompt p = side.build(text, /*add_bos=*/true, {}, clips);
  ASSERT_EQ(p.media.size(), 2u);
  const int n = side.audio_encoder().n_output_tokens(*a);
  for (size_t i = 0; i < 2; ++i) {
    const vision::MediaSpan& m = p.media[i];
    EXPECT_EQ(m.n, n);
    EXPECT_EQ(m.row0, 0);
    EXPECT_EQ(m.audio, clips[i]);
    EXPECT_EQ(m.image, nullptr);
    EXPECT_EQ(m.hash, vision::pcm_hash(*clips[i]));
    EXPECT_LE(m.pos + m.n, int(p.tokens.size()));
  }
  EXPECT_NE(p.media[0].hash, p.media[1].hash);
  EXPECT_GT(p.media[1].pos, p.media[0].pos + n);  // "y" between them
  // Images need a vision projector this file does not have.
  const std::vector<std::shared_ptr<const vision::Image>> images = {
      std::make_shared<const vision::Image>(vision::Image{8, 8, std::vector<uint8_t>(192)})};
  EXPECT_THROW(side.build(text, true, images, clips), InvalidArgument);
}

TEST_F(AudioPromptTest, WrappingTokensTheVocabularyLacksAreRefused) {
  // qwen2a wraps clips in <|audio_bos|> ... <|audio_eos|>; the tiny text
  // model has neither, so the pair is refused naming them.
  try {
    const MediaSide side(mmproj(vision::AudioProjector::Qwen2a), *engine_);
    FAIL() << "a qwen2a projector beside a model without its audio tokens loaded";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("<|audio_bos|>"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tern
