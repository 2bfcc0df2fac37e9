#pragma once
// Whisper's log-mel spectrogram, the input of the audio encoders llama.cpp's
// audio projectors use (ultravox, qwen2a, voxtral), computed as llama.cpp's
// mtmd-audio computes it for them:
//   - 16 kHz mono samples; a clip shorter than n_fft/2 + 1 samples is padded
//     with zeros to that length;
//   - the start reflected by n_fft/2 samples, 30 s of zeros plus n_fft/2
//     more appended at the end (not reflected);
//   - frames of n_fft samples every `hop` samples, times a periodic Hann
//     window, |FFT|^2 of each, through a Slaney-scale mel filter bank with
//     Slaney area normalisation (librosa's default, 0 Hz to sample_rate/2);
//   - log10 of max(power, 2^-24), then clamped below at the clip's maximum
//     minus 8 and mapped by (x + 4) / 4;
//   - cut into chunks of 3000 frames (30 s); the last, incomplete chunk is
//     dropped, so a clip of 30 s exactly gives two (the second mostly the
//     padding), as in llama.cpp.
// The FFT here is tern's own, in double precision; values agree with
// llama.cpp's float FFT to about 1e-5 (tests/unit/vision/audio_mel_test.cpp
// holds them to 1e-4 against recorded llama.cpp values).
#include <cstdint>
#include <span>
#include <vector>

namespace tern {
class TaskPool;
}

namespace tern::vision {

struct MelConfig {
  int n_mel = 128;  // mel bins (the mmproj's clip.audio.num_mel_bins: 80 or 128)
  int n_fft = 400;  // 25 ms at 16 kHz
  int hop = 160;    // 10 ms
  int sample_rate = 16000;
};

// One 30 s window: n_mel rows of n_frames values (mel-major: row m holds
// frames 0..n_frames-1 of bin m).
struct MelChunk {
  int n_mel = 0;
  int n_frames = 0;
  std::vector<float> data;
};

inline constexpr int kMelChunkFrames = 3000;

// The chunks of a clip; throws InvalidArgument for an empty clip or a bad
// config. With a pool, the frames are computed on its workers (the same
// values: frames are independent).
std::vector<MelChunk> whisper_log_mel(std::span<const float> samples, const MelConfig& c,
                                      TaskPool* pool = nullptr);

// The filter bank alone: (n_mel, n_fft/2 + 1), row-major.
std::vector<float> mel_filter_bank(const MelConfig& c);

}  // namespace tern::vision
