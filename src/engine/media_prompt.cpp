#include "tern/engine/media_prompt.h"

#include <algorithm>
#include <string>

#include "tern/core/error.h"
#include "tern/vision/pixel_hash.h"

namespace tern {
namespace {

// The special tokens a projector's wrapping spells (preprocess.cpp's layouts).
std::vector<std::string> wrapping_tokens(const vision::VisionConfig& c) {
  switch (c.projector) {
    case vision::ProjectorType::Idefics3: {
      std::vector<std::string> t{"<fake_token_around_image>", "<global-img>"};
      // The largest grid: the longest edge over the tile size, per side.
      const int g =
          c.preproc_image_size > 0 ? (c.preproc_image_size + c.image_size - 1) / c.image_size : 0;
      for (int y = 1; y <= g; ++y)
        for (int x = 1; x <= g; ++x)
          t.push_back("<row_" + std::to_string(y) + "_col_" + std::to_string(x) + ">");
      return t;
    }
    case vision::ProjectorType::Gemma3:
      return {"<start_of_image>", "<end_of_image>"};
    case vision::ProjectorType::Mlp:
      return {};
  }
  return {};
}

}  // namespace

VisionPrompter::VisionPrompter(const vision::VisionEncoder& encoder, const Tokenizer& tok,
                               int text_d_model)
    : encoder_(encoder), tok_(tok) {
  const vision::VisionConfig& c = encoder.config();
  vision::check_text_model(c, text_d_model);
  std::string missing;
  for (const std::string& t : wrapping_tokens(c))
    if (!tok.token_id(t)) missing += (missing.empty() ? "" : ", ") + t;
  if (!missing.empty())
    throw InvalidArgument("the text model's vocabulary lacks the special tokens a " +
                          std::string(vision::projector_name(c.projector)) +
                          " projector wraps images in: " + missing +
                          " (this mmproj belongs to another model)");
  // The id held at image positions (hashed by the prefix chain, never embedded).
  for (const char* name : {"<image>", "<image_soft_token>"}) {
    if (auto id = tok.token_id(name)) {
      placeholder_ = *id;
      break;
    }
  }
}

void VisionPrompter::append_image(MediaPrompt& p, const std::shared_ptr<const vision::Image>& image,
                                  const std::shared_ptr<vision::EmbeddingSource>& source) const {
  const vision::PreprocessedImage pre = encoder_.preprocess(*image);
  const Sha256Digest hash = vision::pixel_hash(*image);
  const int per_tile = encoder_.tokens_per_tile();
  for (const vision::ImagePiece& piece : pre.layout) {
    if (piece.tile < 0) {
      const auto ids = tok_.encode(piece.text, /*add_bos=*/false, /*parse_special=*/true);
      p.tokens.insert(p.tokens.end(), ids.begin(), ids.end());
      continue;
    }
    vision::MediaSpan m;
    m.pos = int32_t(p.tokens.size());
    m.n = per_tile;
    m.row0 = piece.tile * per_tile;
    m.hash = hash;
    m.image = image;
    m.source = source;
    // llama.cpp decodes gemma3's image tokens with non-causal attention.
    m.bidirectional = encoder_.config().projector == vision::ProjectorType::Gemma3;
    p.media.push_back(std::move(m));
    p.tokens.insert(p.tokens.end(), size_t(per_tile), placeholder_);
  }
}

MediaPrompt build_media_prompt(const Tokenizer& tok, std::span<const TextSegment> text,
                               bool add_bos, size_t n_images, size_t n_audio, bool with_audio,
                               const AppendMedium& append) {
  // Cut the text at the markers: chunks[k] is the text before marker k,
  // which is an audio marker when audio_at[k].
  std::vector<std::vector<TextSegment>> chunks(1);
  std::vector<bool> audio_at;
  for (const TextSegment& seg : text) {
    size_t at = 0;
    for (;;) {
      size_t m = seg.text.find(kMediaMarker, at), len = kMediaMarker.size();
      const size_t a = with_audio ? seg.text.find(kAudioMarker, at) : std::string::npos;
      const bool audio = a < m;
      if (audio) m = a, len = kAudioMarker.size();
      if (m == std::string::npos) break;
      chunks.back().push_back({seg.text.substr(at, m - at), seg.parse_special});
      chunks.emplace_back();
      audio_at.push_back(audio);
      at = m + len;
    }
    chunks.back().push_back({seg.text.substr(at), seg.parse_special});
  }
  const size_t n_markers = audio_at.size();
  const size_t audio_markers = size_t(std::count(audio_at.begin(), audio_at.end(), true));
  const size_t image_markers = n_markers - audio_markers;
  if (image_markers > n_images)
    throw InvalidArgument("the prompt has " + std::to_string(image_markers) + " image markers (" +
                          std::string(kMediaMarker) + ") but only " + std::to_string(n_images) +
                          " images");
  if (audio_markers > n_audio)
    throw InvalidArgument("the prompt has " + std::to_string(audio_markers) + " audio markers (" +
                          std::string(kAudioMarker) + ") but only " + std::to_string(n_audio) +
                          " audio clips");
  MediaPrompt p;
  // Media without a marker go first; marked ones follow in order.
  const size_t lead_images = n_images - image_markers, lead_audio = n_audio - audio_markers;
  size_t next_image = lead_images, next_audio = lead_audio;
  for (size_t k = 0; k < chunks.size(); ++k) {
    auto ids = tok.encode(chunks[k], /*add_bos=*/add_bos && k == 0);
    if (k == 0 && lead_images + lead_audio > 0) {
      // BOS (if any) first, then the unmarked media, then the first chunk's text.
      const size_t n_bos = add_bos && !ids.empty() && ids.front() == tok.bos() ? 1 : 0;
      p.tokens.insert(p.tokens.end(), ids.begin(), ids.begin() + long(n_bos));
      for (size_t i = 0; i < lead_images; ++i) append(p, false, i);
      for (size_t i = 0; i < lead_audio; ++i) append(p, true, i);
      p.tokens.insert(p.tokens.end(), ids.begin() + long(n_bos), ids.end());
    } else {
      p.tokens.insert(p.tokens.end(), ids.begin(), ids.end());
    }
    if (k < n_markers) append(p, audio_at[k], audio_at[k] ? next_audio++ : next_image++);
  }
  return p;
}

MediaPrompt VisionPrompter::build(std::span<const TextSegment> text, bool add_bos,
                                  std::span<const std::shared_ptr<const vision::Image>> images,
                                  const std::shared_ptr<vision::EmbeddingSource>& source) const {
  return build_media_prompt(
      tok_, text, add_bos, images.size(), 0, /*with_audio=*/false,
      [&](MediaPrompt& p, bool, size_t k) { append_image(p, images[k], source); });
}

AudioPrompter::AudioPrompter(const vision::AudioEncoder& encoder, const Tokenizer& tok,
                             int text_d_model)
    : encoder_(encoder), tok_(tok) {
  vision::check_text_model(encoder.config(), text_d_model);
  std::string missing;
  for (const std::string& t : {encoder.begin_text(), encoder.end_text()})
    if (!t.empty() && !tok.token_id(t)) missing += (missing.empty() ? "" : ", ") + t;
  if (!missing.empty())
    throw InvalidArgument("the text model's vocabulary lacks the special tokens a " +
                          std::string(vision::audio_projector_name(encoder.config().projector)) +
                          " audio projector wraps audio in: " + missing +
                          " (this mmproj belongs to another model)");
  // The id held at audio positions (hashed by the prefix chain, never embedded).
  for (const char* name : {"<|AUDIO|>", "[AUDIO]", "<audio>"}) {
    if (auto id = tok.token_id(name)) {
      placeholder_ = *id;
      break;
    }
  }
}

void AudioPrompter::append_audio(MediaPrompt& p,
                                 const std::shared_ptr<const vision::AudioClip>& clip,
                                 const std::shared_ptr<vision::EmbeddingSource>& source) const {
  const int n = encoder_.n_output_tokens(*clip);
  if (n <= 0) throw InvalidArgument("the audio clip is empty");
  const auto text = [&](const std::string& t) {
    if (t.empty()) return;
    const auto ids = tok_.encode(t, /*add_bos=*/false, /*parse_special=*/true);
    p.tokens.insert(p.tokens.end(), ids.begin(), ids.end());
  };
  text(encoder_.begin_text());
  vision::MediaSpan m;
  m.pos = int32_t(p.tokens.size());
  m.n = n;
  m.row0 = 0;
  m.hash = vision::pcm_hash(*clip);
  m.audio = clip;
  m.source = source;
  p.media.push_back(std::move(m));
  p.tokens.insert(p.tokens.end(), size_t(n), placeholder_);
  text(encoder_.end_text());
}

}  // namespace tern
