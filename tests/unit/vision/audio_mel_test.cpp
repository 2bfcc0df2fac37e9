// Whisper's log-mel against llama.cpp's own (libmtmd's whisper preprocessor
// on the clips of synthetic_audio.h, recorded by
// scripts/oracle/gen_whisper_mel.sh into tests/fixtures/audio/whisper_mel.json).
#include "tern/vision/audio_mel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "synthetic_audio.h"
#include "tern/core/error.h"
#include "testutil.h"

namespace tern::vision {
namespace {

TEST(AudioMel, EqualsLlamaCppsWhisperLogMel) {
  std::ifstream in(test::fixture_path("audio/whisper_mel.json"));
  ASSERT_TRUE(in) << "tests/fixtures/audio/whisper_mel.json is missing";
  const nlohmann::json fx = nlohmann::json::parse(in);
  MelConfig c;
  c.n_mel = fx["n_mel"].get<int>();
  const std::vector<int> frames = fx["frames"].get<std::vector<int>>();
  ASSERT_EQ(frames, oracle_audio::kept_frames());
  size_t clips = 0;
  for (const auto& [name, want] : fx["clips"].items()) {
    const std::vector<float> samples = oracle_audio::make(name);
    ASSERT_FALSE(samples.empty()) << name;
    const std::vector<MelChunk> got = whisper_log_mel(samples, c);
    ASSERT_EQ(got.size(), want.size()) << name << ": chunks";
    double worst = 0;
    for (size_t ch = 0; ch < got.size(); ++ch) {
      ASSERT_EQ(got[ch].n_frames, kMelChunkFrames);
      for (size_t fi = 0; fi < frames.size(); ++fi)
        for (int m = 0; m < c.n_mel; ++m) {
          const double w = want[ch][fi][size_t(m)].get<double>();
          const double g = got[ch].data[size_t(m) * kMelChunkFrames + size_t(frames[fi])];
          worst = std::max(worst, std::abs(w - g));
        }
    }
    EXPECT_LT(worst, 1e-4) << name;
    ++clips;
  }
  EXPECT_EQ(clips, oracle_audio::names().size());
}

TEST(AudioMel, ChunksFollowLlamaCppsPadding) {
  MelConfig c;
  c.n_mel = 80;
  // Under 30 s: one window. 30 s exactly: two (the second is the padding),
  // 31 s: two.
  EXPECT_EQ(whisper_log_mel(std::vector<float>(16000, 0.1f), c).size(), 1u);
  EXPECT_EQ(whisper_log_mel(std::vector<float>(30 * 16000, 0.1f), c).size(), 2u);
  EXPECT_EQ(whisper_log_mel(std::vector<float>(31 * 16000, 0.1f), c).size(), 2u);
  const auto one = whisper_log_mel(std::vector<float>(1, 0.5f), c);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].n_mel, 80);
  EXPECT_EQ(one[0].data.size(), size_t(80) * kMelChunkFrames);
  // Silence: every value is the floor's (log10(2^-24) + 4) / 4.
  const auto quiet = whisper_log_mel(std::vector<float>(8000, 0.0f), c);
  for (float v : quiet[0].data) ASSERT_NEAR(v, (std::log10(5.960464477539063e-08) + 4) / 4, 1e-6);
  EXPECT_THROW(whisper_log_mel({}, c), InvalidArgument);
  c.hop = 0;
  EXPECT_THROW(whisper_log_mel(std::vector<float>(10, 0.f), c), InvalidArgument);
}

TEST(AudioMel, FilterBankHasSlaneyAreaNormalisedTriangles) {
  MelConfig c;
  c.n_mel = 128;
  const std::vector<float> f = mel_filter_bank(c);
  ASSERT_EQ(f.size(), size_t(128) * 201);
  // Each filter is a triangle: non-negative, rising then falling, and its
  // area over Hz is 1 (Slaney's normalisation: height 2 / width).
  for (int m = 0; m < 128; ++m) {
    double area = 0;
    for (int k = 0; k < 201; ++k) {
      ASSERT_GE(f[size_t(m) * 201 + size_t(k)], 0.0f);
      area += f[size_t(m) * 201 + size_t(k)] * 40.0;  // 40 Hz a bin
    }
    // Only the wide filters (the top ones, tens of bins) have a Riemann sum
    // over 40 Hz bins close to their area.
    if (m >= 100) {
      EXPECT_NEAR(area, 1.0, 0.02) << m;
    }
  }
}

}  // namespace
}  // namespace tern::vision
