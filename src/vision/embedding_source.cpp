#include "tern/vision/embedding_source.h"

namespace tern::vision {

std::shared_ptr<const Embeddings> EncoderSource::rows_for(const Sha256Digest& /*hash*/,
                                                          const Image& image) {
  return std::make_shared<const Embeddings>(encoder_.encode(image, pool_));
}

}  // namespace tern::vision
