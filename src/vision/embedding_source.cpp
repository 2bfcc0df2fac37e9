#include "tern/vision/embedding_source.h"

#include "tern/core/error.h"

namespace tern::vision {
namespace {

// Patch rows per row-wise stage of a sliced encode: at 64, a SigLIP-B/16
// stage (the MLP of 64 rows, 0.7 GFLOP) fits inside a decode step's slack
// on 2 cores; smaller blocks re-read the weights more often.
constexpr int kSliceRowBlock = 64;

}  // namespace

EmbeddingSource::Fetched EmbeddingSource::fetch_span(const MediaSpan& m) {
  if (!m.image) throw InvalidArgument("this model's projector encodes images, not audio");
  return fetch(m.hash, *m.image);
}

std::unique_ptr<MediaJob> EmbeddingSource::start_job(const MediaSpan& m) {
  if (!m.image) return nullptr;
  std::unique_ptr<EncodeJob> job = start_encode(m.image);
  return job ? job_of(std::move(*job)) : nullptr;
}

std::shared_ptr<const Embeddings> EncoderSource::rows_for(const Sha256Digest& /*hash*/,
                                                          const Image& image) {
  return std::make_shared<const Embeddings>(encoder_.encode(image, pool_));
}

std::unique_ptr<EncodeJob> EncoderSource::start_encode(const std::shared_ptr<const Image>& image) {
  return std::make_unique<EncodeJob>(encoder_.start_encode(image, kSliceRowBlock));
}

CachedSource::CachedSource(EmbeddingCache& cache, const VisionEncoder& encoder, TaskPool& pool,
                           const Sha256Digest& projector)
    : cache_(cache),
      encoder_(encoder),
      pool_(pool),
      projector_(projector),
      preprocess_(preprocess_fingerprint(encoder.config())) {}

std::shared_ptr<const Embeddings> CachedSource::rows_for(const Sha256Digest& hash,
                                                         const Image& image) {
  return fetch(hash, image).rows;
}

EmbeddingSource::Fetched CachedSource::fetch(const Sha256Digest& hash, const Image& image) {
  const EmbeddingKey key{hash, projector_, preprocess_};
  Fetched f;
  f.rows = cache_.get_or_encode(
      key, [&] { return encoder_.encode(image, pool_); }, &f.cached);
  return f;
}

std::shared_ptr<const Embeddings> CachedSource::cached(const Sha256Digest& hash) {
  return cache_.find(EmbeddingKey{hash, projector_, preprocess_});
}

std::unique_ptr<EncodeJob> CachedSource::start_encode(const std::shared_ptr<const Image>& image) {
  return std::make_unique<EncodeJob>(encoder_.start_encode(image, kSliceRowBlock));
}

std::shared_ptr<const Embeddings> CachedSource::store(const Sha256Digest& hash, Embeddings rows) {
  return cache_.insert(EmbeddingKey{hash, projector_, preprocess_}, std::move(rows));
}

}  // namespace tern::vision
