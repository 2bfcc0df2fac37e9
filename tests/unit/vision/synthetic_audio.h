#pragma once
// The synthetic clips the audio preprocessing oracle is recorded on (16 kHz
// mono floats), as plain formulas: the oracle harness
// (scripts/oracle/whisper_mel.cpp, built against llama.cpp) and tern's
// audio_mel_test.cpp both include this file, so they make the same samples
// without sharing a build. Sines are computed in double and rounded once.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace oracle_audio {

inline const std::vector<std::string>& names() {
  static const std::vector<std::string> n = {"tone", "chirp", "noise", "click", "long"};
  return n;
}

// An empty vector for an unknown name.
inline std::vector<float> make(const std::string& name) {
  constexpr double kRate = 16000.0;
  constexpr double kPi = 3.14159265358979323846;
  std::vector<float> s;
  if (name == "tone") {  // 1 s of 440 Hz at half scale
    s.resize(16000);
    for (size_t i = 0; i < s.size(); ++i) s[i] = float(0.5 * std::sin(2 * kPi * 440.0 * i / kRate));
  } else if (name == "chirp") {  // 2.5 s sweeping 200 Hz -> 6 kHz
    s.resize(40000);
    const double dur = double(s.size()) / kRate;
    for (size_t i = 0; i < s.size(); ++i) {
      const double t = i / kRate;
      s[i] = float(0.3 * std::sin(2 * kPi * (200.0 * t + (6000.0 - 200.0) * t * t / (2 * dur))));
    }
  } else if (name == "noise") {  // 0.75 s of uniform noise in [-0.5, 0.5)
    s.resize(12000);
    uint32_t state = 2463534242u;
    for (auto& v : s) {
      state ^= state << 13;
      state ^= state >> 17;
      state ^= state << 5;
      v = float(double(state >> 8) / double(1u << 24) - 0.5);
    }
  } else if (name == "click") {  // 150 samples: shorter than one frame's half
    s.resize(150);
    for (size_t i = 0; i < s.size(); ++i) s[i] = float(std::exp(-double(i) / 20.0) * 0.8);
  } else if (name == "long") {  // 31 s: a formant-like buzz, two 30 s windows
    s.resize(31 * 16000);
    for (size_t i = 0; i < s.size(); ++i) {
      const double t = i / kRate;
      const double f0 = 120.0 + 30.0 * std::sin(2 * kPi * 0.5 * t);
      s[i] = float(0.2 * std::sin(2 * kPi * f0 * t) + 0.1 * std::sin(2 * kPi * 700.0 * t) +
                   0.05 * std::sin(2 * kPi * 1200.0 * t));
    }
  }
  return s;
}

// The frames of each 3000-frame chunk the fixture keeps (every mel bin of each).
inline std::vector<int> kept_frames() {
  std::vector<int> f = {0, 1, 2, 3};
  for (int t = 97; t < 2996; t += 97) f.push_back(t);
  for (int t = 2996; t < 3000; ++t) f.push_back(t);
  return f;
}

}  // namespace oracle_audio
