#include "tern/vision/audio_source.h"

#include "tern/core/error.h"

namespace tern::vision {
namespace {

const AudioClip& clip_of(const MediaSpan& m) {
  if (!m.audio) throw InvalidArgument("this model's audio encoder encodes audio clips, not images");
  return *m.audio;
}

}  // namespace

Sha256Digest audio_preprocess_fingerprint(const AudioConfig& c) {
  const MelConfig mel = c.mel();
  Sha256 s;
  s.update("tern-audio-preprocess-v1").update(audio_projector_name(c.projector));
  for (int v :
       {mel.n_mel, mel.n_fft, mel.hop, mel.sample_rate, c.stack_factor, AudioConfig::kFrames})
    s.update_u32(uint32_t(v));
  return s.finish();
}

AudioSource::AudioSource(EmbeddingCache* cache, const AudioEncoder& encoder, TaskPool& pool,
                         const Sha256Digest& projector)
    : cache_(cache),
      encoder_(encoder),
      pool_(pool),
      projector_(projector),
      preprocess_(audio_preprocess_fingerprint(encoder.config())) {}

std::shared_ptr<const Embeddings> AudioSource::rows_for(const Sha256Digest& /*hash*/,
                                                        const Image& /*image*/) {
  throw InvalidArgument("this model's audio encoder encodes audio clips, not images");
}

EmbeddingSource::Fetched AudioSource::fetch_span(const MediaSpan& m) {
  const AudioClip& clip = clip_of(m);
  Fetched f;
  if (!cache_) {
    f.rows = std::make_shared<const Embeddings>(encoder_.encode(clip, pool_));
    return f;
  }
  f.rows = cache_->get_or_encode(
      key(m.hash), [&] { return encoder_.encode(clip, pool_); }, &f.cached);
  return f;
}

std::shared_ptr<const Embeddings> AudioSource::cached(const Sha256Digest& hash) {
  return cache_ ? cache_->find(key(hash)) : nullptr;
}

std::unique_ptr<MediaJob> AudioSource::start_job(const MediaSpan& m) {
  clip_of(m);
  return job_of(encoder_.start_encode(m.audio));
}

std::shared_ptr<const Embeddings> AudioSource::store(const Sha256Digest& hash, Embeddings rows) {
  if (!cache_) return std::make_shared<const Embeddings>(std::move(rows));
  return cache_->insert(key(hash), std::move(rows));
}

}  // namespace tern::vision
