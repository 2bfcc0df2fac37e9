#pragma once
// How images enter a text model's prompt: the projector checked against the
// text model when both are loaded, and prompts built as token ids plus the
// MediaSpans the scheduler fills with embedding rows.
//
// An image becomes its projector's layout (preprocess.h): wrapping text with
// special tokens (idefics3: <fake_token_around_image><row_i_col_j> ...
// <global-img>; gemma3: <start_of_image> ... <end_of_image>), each piece
// tokenized on its own with special-token parsing on, as llama.cpp's mtmd
// does, and one span of placeholder ids per tile.
//
// Where an image goes: at each kMediaMarker in the text, in order; images
// left over (no marker for them) go before the text (after the BOS), as
// llama-mtmd-cli places them.
//
// An audio clip becomes, as in mtmd: the encoder's begin text (special
// tokens on), one span of n_output_tokens(clip) placeholder ids keyed by
// its pcm_hash, the end text. Clips go at the audio markers (kAudioMarker),
// in order, unmarked ones first as images do.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "tern/tokenizer/tokenizer.h"
#include "tern/vision/audio_encoder.h"
#include "tern/vision/embedding_source.h"

namespace tern {

// llama.cpp's default media marker.
inline constexpr std::string_view kMediaMarker = "<__media__>";
// Where an audio clip goes. llama.cpp has one marker for every medium; tern
// marks the two kinds apart so images and clips each keep their own order.
inline constexpr std::string_view kAudioMarker = "<__audio__>";

struct MediaPrompt {
  std::vector<int32_t> tokens;
  std::vector<vision::MediaSpan> media;  // sorted by position
};

// Cuts the text at the markers and appends, in order, the text pieces and
// each marker's medium: append(p, false, k) for the k-th image (n_images in
// all), append(p, true, k) for the k-th clip (n_audio). Media without a
// marker go first (after the BOS): images, then clips. Audio markers are
// recognised only when with_audio. Throws InvalidArgument when there are
// more markers of a kind than media of it.
using AppendMedium = std::function<void(MediaPrompt& p, bool audio, size_t k)>;
MediaPrompt build_media_prompt(const Tokenizer& tok, std::span<const TextSegment> text,
                               bool add_bos, size_t n_images, size_t n_audio, bool with_audio,
                               const AppendMedium& append);

class VisionPrompter {
 public:
  // Checks that the pair fits: the projector's output width equals the text
  // model's n_embd, and every special token the projector's wrapping needs
  // (and the image placeholder) is in the vocabulary. Throws InvalidArgument
  // naming what is missing. encoder and tokenizer must outlive it.
  VisionPrompter(const vision::VisionEncoder& encoder, const Tokenizer& tok, int text_d_model);

  int32_t placeholder() const { return placeholder_; }  // the id at image positions

  // Text segments (parse_special per segment) with images at the markers.
  // images[k] goes at the k-th marker; the rest go first. Every span gets
  // source. Throws InvalidArgument when there are more markers than images.
  MediaPrompt build(std::span<const TextSegment> text, bool add_bos,
                    std::span<const std::shared_ptr<const vision::Image>> images,
                    const std::shared_ptr<vision::EmbeddingSource>& source) const;

  // Appends one image's layout to p.
  void append_image(MediaPrompt& p, const std::shared_ptr<const vision::Image>& image,
                    const std::shared_ptr<vision::EmbeddingSource>& source) const;

 private:
  const vision::VisionEncoder& encoder_;
  const Tokenizer& tok_;
  int32_t placeholder_ = 0;
};

class AudioPrompter {
 public:
  // Checks that the pair fits: the encoder's output width is the text
  // model's n_embd, and its begin / end texts are special tokens of the
  // vocabulary. Throws InvalidArgument naming what is missing. encoder and
  // tokenizer must outlive it.
  AudioPrompter(const vision::AudioEncoder& encoder, const Tokenizer& tok, int text_d_model);

  // Appends one clip's layout to p: begin text, its rows' span, end text.
  void append_audio(MediaPrompt& p, const std::shared_ptr<const vision::AudioClip>& clip,
                    const std::shared_ptr<vision::EmbeddingSource>& source) const;

 private:
  const vision::AudioEncoder& encoder_;
  const Tokenizer& tok_;
  int32_t placeholder_ = 0;
};

}  // namespace tern
