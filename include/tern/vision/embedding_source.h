#pragma once
// Where a medium's embedding rows come from (an image's, an audio clip's),
// and how a prompt refers to them.
//
// A prompt with media is token ids plus MediaSpans: each span is a run of
// prompt positions whose input is a run of the medium's embedding rows (the
// token ids there are placeholders). The scheduler asks the span's
// EmbeddingSource for the rows on the engine thread before the first step
// that needs them (a cache hit, or an encode it advances in slices between
// steps while that prompt waits before the image), keeps them with the sequence until its prefill
// has passed every span of that image, then lets them go. The KV prefix chain keys the span's
// positions by `hash` (pixel_hash), so two different images never share KV and the same image in
// the same prompt finds its cached KV. An audio clip's spans are keyed by its
// pcm_hash the same way.
//
// EncoderSource encodes on every call; an embedding cache keyed by the hash
// can sit in front of it (or of any source) behind the same interface.
#include <cstdint>
#include <memory>

#include "tern/core/sha256.h"
#include "tern/vision/audio.h"
#include "tern/vision/embedding_cache.h"
#include "tern/vision/encoder.h"
#include "tern/vision/image.h"
#include "tern/vision/media_job.h"

namespace tern {
class TaskPool;
}

namespace tern::vision {

struct MediaSpan;

class EmbeddingSource {
 public:
  virtual ~EmbeddingSource() = default;
  // Every row of the image (all tiles, in layout order): (n_tokens, n_embd).
  // May take long (an encode). Throws (ImageError, InvalidArgument, ...) with
  // a message for the request's error.
  virtual std::shared_ptr<const Embeddings> rows_for(const Sha256Digest& hash,
                                                     const Image& image) = 0;
  // The same rows, saying whether a cache had them (false: encoded now).
  struct Fetched {
    std::shared_ptr<const Embeddings> rows;
    bool cached = false;
  };
  virtual Fetched fetch(const Sha256Digest& hash, const Image& image) {
    return {rows_for(hash, image), false};
  }

  // The non-blocking way, for a scheduler that encodes between its steps:
  // cached() when a cache has the rows, else start_encode() and advance the
  // job in slices, then store() its rows. A source that cannot encode in
  // slices answers nullptr to start_encode (then fetch() is the way).
  //
  // The rows if a cache holds them (a hit), else nullptr (a miss); never encodes.
  virtual std::shared_ptr<const Embeddings> cached(const Sha256Digest& /*hash*/) { return nullptr; }
  // A resumable encode of every tile of the image.
  virtual std::unique_ptr<EncodeJob> start_encode(const std::shared_ptr<const Image>& /*image*/) {
    return nullptr;
  }
  // A finished encode's rows, kept where cached() finds them (when there is a cache).
  virtual std::shared_ptr<const Embeddings> store(const Sha256Digest& /*hash*/, Embeddings rows) {
    return std::make_shared<const Embeddings>(std::move(rows));
  }

  // What the scheduler calls, for any medium: the span's (its image, or its
  // audio clip). By default the image ways above; an audio source overrides
  // them. fetch_span throws InvalidArgument for a medium the source does not
  // encode; start_job answers nullptr where start_encode would.
  virtual Fetched fetch_span(const MediaSpan& m);
  virtual std::unique_ptr<MediaJob> start_job(const MediaSpan& m);
};

// Runs the encoder on the caller's thread (its kernels on `pool`). The
// encoder and pool must outlive it.
class EncoderSource final : public EmbeddingSource {
 public:
  EncoderSource(const VisionEncoder& encoder, TaskPool& pool) : encoder_(encoder), pool_(pool) {}
  std::shared_ptr<const Embeddings> rows_for(const Sha256Digest& hash, const Image& image) override;
  std::unique_ptr<EncodeJob> start_encode(const std::shared_ptr<const Image>& image) override;

 private:
  const VisionEncoder& encoder_;
  TaskPool& pool_;
};

// An EmbeddingCache in front of the encoder: rows keyed by (pixel hash,
// projector fingerprint, preprocessing settings), encoded on a miss. The
// cache, encoder and pool must outlive it.
class CachedSource final : public EmbeddingSource {
 public:
  CachedSource(EmbeddingCache& cache, const VisionEncoder& encoder, TaskPool& pool,
               const Sha256Digest& projector);
  std::shared_ptr<const Embeddings> rows_for(const Sha256Digest& hash, const Image& image) override;
  Fetched fetch(const Sha256Digest& hash, const Image& image) override;
  std::shared_ptr<const Embeddings> cached(const Sha256Digest& hash) override;
  std::unique_ptr<EncodeJob> start_encode(const std::shared_ptr<const Image>& image) override;
  std::shared_ptr<const Embeddings> store(const Sha256Digest& hash, Embeddings rows) override;

 private:
  EmbeddingCache& cache_;
  const VisionEncoder& encoder_;
  TaskPool& pool_;
  Sha256Digest projector_;
  Sha256Digest preprocess_;
};

// Positions [pos, pos + n) of a prompt take rows [row0, row0 + n) of the
// image's rows.
struct MediaSpan {
  int32_t pos = 0;
  int32_t n = 0;
  int32_t row0 = 0;
  Sha256Digest hash{};  // pixel_hash(*image), or pcm_hash(*audio)
  // The span's positions attend to each other both ways (gemma3, as
  // llama.cpp decodes its images); a prefill chunk never ends inside it.
  bool bidirectional = false;
  // What the source encodes: an image, or else an audio clip.
  std::shared_ptr<const Image> image;
  std::shared_ptr<const AudioClip> audio;
  std::shared_ptr<EmbeddingSource> source;  // where the rows come from
};

}  // namespace tern::vision
