#pragma once
// The audio encoder: a decoded clip (16 kHz mono, vision/audio.h) in,
// embedding rows of the text model's width out. The clip becomes Whisper
// log-mel chunks of 30 s (vision/audio_mel.h, exactly as llama.cpp's
// mtmd-audio), each chunk runs through the encoder and projector of the
// mmproj file (vision/audio_mmproj.h), and the chunks' rows are
// concatenated in time order: n_output_tokens(clip) = chunks x
// tokens_per_chunk().
//
// Splicing into the text model, as llama.cpp's mtmd does: the text
// begin_text(), then every row (one batch position each), then end_text().
// Both are special tokens spelled out, to tokenize with special tokens
// enabled; "" where the projector has none:
//   ultravox  ""               ""
//   qwen2a    "<|audio_bos|>"  "<|audio_eos|>"
//   voxtral   "[BEGIN_AUDIO]"  ""
// The text model must have those tokens in its vocabulary: a real
// Qwen2-Audio / Qwen2.5-Omni or Voxtral text model does; SmolLM2 (the test
// text model) does not, so with it the markers would tokenize as ordinary
// text -- pair it with ultravox, which needs none. The caller (the server)
// decides whether to refuse a model that lacks them.
//
// Two implementations with one interface, as for images: AudioEncoder
// (weights repacked to int8 tiles, W8A8 GEMMs and int8 attention products on
// the task pool, fp32 norms / softmax / GELU) and reference_encode_chunk()
// (fp32 weights, plain loops, fp64 accumulation): the oracle.
#include <memory>
#include <string>

#include "tern/vision/audio.h"
#include "tern/vision/audio_mel.h"
#include "tern/vision/audio_mmproj.h"
#include "tern/vision/encoder.h"  // Embeddings

namespace tern {
class TaskPool;
}

namespace tern::vision {

class AudioEncoder;

// A resumable encode of one clip, with EncodeJob's interface: first the
// log-mel chunks, then per chunk the stages -- the two convolutions (a block
// of row_block positions at a time), each layer's row-wise parts (LN1 + QKV;
// O + residual + LN2 + FFN + residual) a row block at a time, the attention
// one head at a time -- then the pooling, post LN and stacking, and the
// projector a block of token rows at a time. The rows
// equal AudioEncoder::encode's bit for bit. The encoder must outlive the job.
// One thread at a time.
class AudioEncodeJob {
 public:
  ~AudioEncodeJob();
  AudioEncodeJob(AudioEncodeJob&&) noexcept;
  AudioEncodeJob& operator=(AudioEncodeJob&&) noexcept;

  // Runs stages until done or until the next one's predicted cost would pass
  // budget_ms; at least one stage a call. Returns done(). Throws
  // InvalidArgument for an empty clip (from the mel step).
  bool advance(TaskPool& pool, double budget_ms);
  bool done() const;
  // Every row (all chunks, in time order): (n_tokens, d_out). Once, after done().
  Embeddings take();

  int stages_total() const;  // known after the mel step (advance's first)
  int stages_done() const;
  int slices() const;      // advance() calls that ran a stage
  double busy_ms() const;  // time spent in them
  // Measured cost of the GEMM-heavy stages (EWMA), which predicts the next
  // stage's; seed it from an earlier job so the first slice fits too.
  double ms_per_gflop() const;
  void set_ms_per_gflop(double v);

 private:
  friend class AudioEncoder;
  struct State;
  explicit AudioEncodeJob(std::unique_ptr<State> st);
  std::unique_ptr<State> st_;
};

class AudioEncoder {
 public:
  // Opens and validates the file (AudioMmproj::open's errors), repacks the
  // weights. An image-only file is a FormatError saying it has no audio
  // encoder; an embedding width that is not a multiple of 32 (no Whisper
  // size) is InvalidArgument.
  static AudioEncoder load(const std::string& mmproj_path);
  static AudioEncoder from_mmproj(AudioMmproj mmproj);
  ~AudioEncoder();
  AudioEncoder(AudioEncoder&&) noexcept;
  AudioEncoder& operator=(AudioEncoder&&) noexcept;

  const AudioConfig& config() const;
  int tokens_per_chunk() const { return config().tokens_per_chunk(); }
  // Rows the clip becomes (chunks x tokens_per_chunk); 0 for an empty clip.
  int n_output_tokens(const AudioClip& clip) const;
  static int n_chunks(const AudioClip& clip);

  // The special-token text mtmd wraps the rows with ("" if none; see above).
  const std::string& begin_text() const;
  const std::string& end_text() const;

  // Every 30 s chunk of the clip, rows concatenated: (n_output_tokens, d_out).
  // Throws InvalidArgument for an empty clip or a sample rate other than 16 kHz.
  Embeddings encode(const AudioClip& clip, TaskPool& pool) const;
  // One chunk of features (n_mel, 3000): (tokens_per_chunk, d_out).
  Embeddings encode_chunk(const MelChunk& mel, TaskPool& pool) const;

  // The same as a resumable job; row_block positions per row-wise stage
  // (0: all of them).
  static constexpr int kJobRowBlock = 128;
  AudioEncodeJob start_encode(std::shared_ptr<const AudioClip> clip,
                              int row_block = kJobRowBlock) const;

 private:
  struct Impl;
  friend class AudioEncodeJob;
  explicit AudioEncoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The scalar fp32 twin of encode_chunk. Like llama.cpp (ggml's conv_1d runs
// im2col in fp16), the two convolutions round their inputs and kernels to
// fp16 before the fp64-accumulated product; everything else is fp32 / fp64.
Embeddings reference_encode_chunk(const AudioMmproj& mmproj, const MelChunk& mel);

}  // namespace tern::vision
