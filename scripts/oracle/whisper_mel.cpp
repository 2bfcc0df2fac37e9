// The audio preprocessing oracle: llama.cpp's own Whisper log-mel
// (mtmd_audio_preprocessor_whisper, as libmtmd runs it for the ultravox,
// qwen2a and voxtral projectors) on the synthetic clips of
// tests/unit/vision/synthetic_audio.h, written as the JSON fixture
// tests/fixtures/audio/whisper_mel.json. Built and run by
// scripts/oracle/gen_whisper_mel.sh against the peer's libmtmd; not part of
// tern's build.
//
// The preprocessor reads only its hyper-parameters (clip_hparams: n_mel_bins
// and the audio_* fields), so no projector file is needed: the harness
// builds an object of the same layout on hand-set hparams and calls the
// library's exported initialize() and preprocess() on it.
//
//   whisper_mel N_MEL > whisper_mel.json
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mtmd-audio.h"
#include "synthetic_audio.h"

namespace {

// mtmd_audio_preprocessor_whisper's layout (the base and its cache), built
// from hparams instead of a clip context.
struct WhisperOnHparams : mtmd_audio_preprocessor {
  explicit WhisperOnHparams(const clip_hparams& h) : mtmd_audio_preprocessor(h) {}
  void initialize() override {}
  bool preprocess(const float*, size_t, std::vector<mtmd_audio_mel>&) const override {
    return false;
  }
  mtmd_audio_cache cache;
};
static_assert(sizeof(WhisperOnHparams) == sizeof(mtmd_audio_preprocessor_whisper));

}  // namespace

int main(int argc, char** argv) {
  clip_hparams hp;
  hp.n_mel_bins = argc > 1 ? std::atoi(argv[1]) : 128;
  hp.audio_sample_rate = 16000;
  hp.audio_n_fft = 400;
  hp.audio_window_len = 400;
  hp.audio_hop_len = 160;
  WhisperOnHparams obj(hp);
  auto* w = reinterpret_cast<mtmd_audio_preprocessor_whisper*>(&obj);
  w->mtmd_audio_preprocessor_whisper::initialize();
  std::printf("{\n  \"n_mel\": %d,\n  \"frames\": [", hp.n_mel_bins);
  const std::vector<int> frames = oracle_audio::kept_frames();
  for (size_t i = 0; i < frames.size(); ++i) std::printf("%s%d", i ? ", " : "", frames[i]);
  std::printf("],\n  \"clips\": {");
  bool first_clip = true;
  for (const std::string& name : oracle_audio::names()) {
    const std::vector<float> s = oracle_audio::make(name);
    std::vector<mtmd_audio_mel> mel;
    if (!w->mtmd_audio_preprocessor_whisper::preprocess(s.data(), s.size(), mel)) {
      std::fprintf(stderr, "%s: preprocess failed\n", name.c_str());
      return 1;
    }
    std::printf("%s\n    \"%s\": [", first_clip ? "" : ",", name.c_str());
    first_clip = false;
    for (size_t c = 0; c < mel.size(); ++c) {
      std::printf("%s\n      [", c ? "," : "");
      for (size_t fi = 0; fi < frames.size(); ++fi) {
        std::printf("%s[", fi ? ",\n       " : "");
        for (int m = 0; m < mel[c].n_mel; ++m)
          std::printf("%s%.6f", m ? "," : "", mel[c].data[size_t(m) * mel[c].n_len + frames[fi]]);
        std::printf("]");
      }
      std::printf("]");
    }
    std::printf("]");
  }
  std::printf("\n  }\n}\n");
  return 0;
}
