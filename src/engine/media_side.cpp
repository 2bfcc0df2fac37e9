#include "tern/engine/media_side.h"

#include "tern/core/error.h"
#include "tern/core/log.h"
#include "tern/vision/audio_source.h"

namespace tern {

MediaSide::MediaSide(const std::string& mmproj_path, Engine& engine, vision::EmbeddingCache* cache)
    : tok_(engine.tokenizer()) {
  const vision::MmprojModalities has = vision::mmproj_modalities(mmproj_path);
  // A file that declares neither is read as a vision projector (its errors then say why).
  const Sha256Digest fingerprint = vision::projector_fingerprint(mmproj_path);
  if (has.vision || !has.audio) {
    try {
      encoder_ = std::make_unique<vision::VisionEncoder>(vision::VisionEncoder::load(mmproj_path));
    } catch (const Error& e) {
      // A file with both (Qwen2.5-Omni's) whose vision half tern does not
      // run yet still serves its audio.
      if (!has.audio) throw;
      log::get("vision")->warn("{}: images off, the vision projector is not usable: {}",
                               mmproj_path, e.what());
    }
  }
  if (encoder_) {
    try {
      prompter_ =
          std::make_unique<VisionPrompter>(*encoder_, engine.tokenizer(), engine.config().d_model);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(mmproj_path + ": " + e.what());
    }
    if (cache) {
      source_ =
          std::make_shared<vision::CachedSource>(*cache, *encoder_, engine.pool(), fingerprint);
    } else {
      source_ = std::make_shared<vision::EncoderSource>(*encoder_, engine.pool());
    }
    log::get("vision")->info("{}: {} projector, {} rows per tile", mmproj_path,
                             vision::projector_name(encoder_->config().projector),
                             encoder_->tokens_per_tile());
  }
  if (has.audio) {
    audio_encoder_ =
        std::make_unique<vision::AudioEncoder>(vision::AudioEncoder::load(mmproj_path));
    try {
      audio_prompter_ = std::make_unique<AudioPrompter>(*audio_encoder_, engine.tokenizer(),
                                                        engine.config().d_model);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(mmproj_path + ": " + e.what());
    }
    audio_source_ =
        std::make_shared<vision::AudioSource>(cache, *audio_encoder_, engine.pool(), fingerprint);
    log::get("vision")->info("{}: {} audio encoder, {} rows per 30 s", mmproj_path,
                             vision::audio_projector_name(audio_encoder_->config().projector),
                             audio_encoder_->tokens_per_chunk());
  }
}

MediaSide::~MediaSide() = default;

MediaPrompt MediaSide::build(
    std::span<const TextSegment> text, bool add_bos,
    std::span<const std::shared_ptr<const vision::Image>> images,
    std::span<const std::shared_ptr<const vision::AudioClip>> audio) const {
  if (!images.empty() && !prompter_)
    throw InvalidArgument("this mmproj file has no vision projector; it takes no images");
  if (!audio.empty() && !audio_prompter_)
    throw InvalidArgument("this mmproj file has no audio encoder; it takes no audio");
  return build_media_prompt(tok_, text, add_bos, images.size(), audio.size(),
                            /*with_audio=*/audio_prompter_ != nullptr,
                            [&](MediaPrompt& p, bool is_audio, size_t k) {
                              if (is_audio)
                                audio_prompter_->append_audio(p, audio[k], audio_source_);
                              else
                                prompter_->append_image(p, images[k], source_);
                            });
}

}  // namespace tern
