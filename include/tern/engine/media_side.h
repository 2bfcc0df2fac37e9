#pragma once
// A llama.cpp multimodal projector file (mmproj) loaded beside the engine's
// text model: its vision projector, its audio encoder, or both -- whatever
// the file holds (clip.has_vision_encoder / clip.has_audio_encoder) --
// each checked against the text model, and prompts with images and audio
// clips built for them (media_prompt.h). Used by `tern run/chat --mmproj`
// and `tern serve --mmproj`; with an EmbeddingCache, a medium's rows are
// encoded once per (content hash, projector, preprocessing) and found again
// after that.
#include <memory>
#include <span>
#include <string>

#include "tern/engine/engine.h"
#include "tern/engine/media_prompt.h"
#include "tern/vision/audio_encoder.h"
#include "tern/vision/embedding_cache.h"
#include "tern/vision/embedding_source.h"

namespace tern {

class MediaSide {
 public:
  // Loads what the file holds and checks it against the engine's text
  // model (InvalidArgument naming the file and the mismatch). The engine
  // and the cache (nullptr: encode every time) must outlive it.
  MediaSide(const std::string& mmproj_path, Engine& engine,
            vision::EmbeddingCache* cache = nullptr);
  ~MediaSide();

  bool has_vision() const { return encoder_ != nullptr; }
  bool has_audio() const { return audio_encoder_ != nullptr; }

  // Images at the image markers (InvalidArgument when there are images and
  // no vision projector).
  MediaPrompt build(std::span<const TextSegment> text, bool add_bos,
                    std::span<const std::shared_ptr<const vision::Image>> images) const {
    return build(text, add_bos, images, {});
  }
  // Images and audio clips at their markers (InvalidArgument for a medium
  // the file has no encoder for).
  MediaPrompt build(std::span<const TextSegment> text, bool add_bos,
                    std::span<const std::shared_ptr<const vision::Image>> images,
                    std::span<const std::shared_ptr<const vision::AudioClip>> audio) const;

  // The vision projector (has_vision() only).
  const vision::VisionEncoder& encoder() const { return *encoder_; }
  // The audio encoder (has_audio() only).
  const vision::AudioEncoder& audio_encoder() const { return *audio_encoder_; }

 private:
  std::unique_ptr<vision::VisionEncoder> encoder_;
  std::unique_ptr<VisionPrompter> prompter_;
  std::shared_ptr<vision::EmbeddingSource> source_;
  std::unique_ptr<vision::AudioEncoder> audio_encoder_;
  std::unique_ptr<AudioPrompter> audio_prompter_;
  std::shared_ptr<vision::EmbeddingSource> audio_source_;
  const Tokenizer& tok_;
};

}  // namespace tern
