#pragma once
// Where an audio clip's embedding rows come from: the audio encoder, with
// an EmbeddingCache in front of it when there is one (the same cache, disk
// tier and memory budget as images'). Rows are keyed by (pcm_hash, projector
// file SHA-256, the audio preprocessing: projector type, mel bins, window,
// hop, rate, stack factor), so the same sound sent as WAV and as FLAC is one
// entry. It serves spans that hold an audio clip (MediaSpan::audio) through
// EmbeddingSource's media-agnostic calls (fetch_span, start_job); the image
// calls refuse. The cache (may be null), encoder and pool must outlive it.
#include <memory>

#include "tern/vision/audio_encoder.h"
#include "tern/vision/embedding_source.h"

namespace tern::vision {

// SHA-256 over what an audio clip's rows depend on besides its samples and
// the projector file.
Sha256Digest audio_preprocess_fingerprint(const AudioConfig& c);

class AudioSource final : public EmbeddingSource {
 public:
  AudioSource(EmbeddingCache* cache, const AudioEncoder& encoder, TaskPool& pool,
              const Sha256Digest& projector);

  // Images are not this source's: InvalidArgument.
  std::shared_ptr<const Embeddings> rows_for(const Sha256Digest& hash, const Image& image) override;

  Fetched fetch_span(const MediaSpan& m) override;
  std::shared_ptr<const Embeddings> cached(const Sha256Digest& hash) override;
  std::unique_ptr<MediaJob> start_job(const MediaSpan& m) override;
  std::shared_ptr<const Embeddings> store(const Sha256Digest& hash, Embeddings rows) override;

 private:
  EmbeddingKey key(const Sha256Digest& hash) const { return {hash, projector_, preprocess_}; }

  EmbeddingCache* cache_;
  const AudioEncoder& encoder_;
  TaskPool& pool_;
  Sha256Digest projector_;
  Sha256Digest preprocess_;
};

}  // namespace tern::vision
