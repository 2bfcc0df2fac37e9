#pragma once
// An image's identity for every cache (vision embeddings, the KV prefix
// chain): SHA-256 over its decoded pixels, so the same picture hashes the same
// whatever carried it (PNG or BMP, a file, base64 or a URL), while a
// re-encoded (lossy) JPEG does not. One definition (src/vision/pixel_hash.cpp),
// shared by the embedding cache, media loading and the prefix chain:
//
//   Sha256Digest pixel_hash(const Image& img);   // declared in image.h
//
// SHA-256 over width, height, channels (3) as little-endian u32, then the
// RGB pixels row by row.
#include "tern/core/sha256.h"
#include "tern/vision/image.h"
