// tern encode-audio: runs the audio encoder of an mmproj file on a clip (a
// file, or a synthetic formant-like buzz of --seconds) and reports the 30 s
// chunks, the tokens and the encode time per chunk -- comparable with
// llama.cpp's libmtmd on the same file and thread count
// (scripts/oracle/mtmd_audio_embed.cpp prints its per-chunk times).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>

#include "commands.h"
#include "tern/core/task_pool.h"
#include "tern/vision/audio_encoder.h"

namespace tern::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

vision::AudioClip synthetic_clip(double seconds) {  // a voice-like buzz with two formants
  vision::AudioClip c{std::vector<float>(size_t(std::max(1.0, seconds * 16000))), 16000};
  constexpr double kPi = 3.14159265358979323846;
  for (size_t i = 0; i < c.samples.size(); ++i) {
    const double t = double(i) / 16000;
    const double f0 = 120.0 + 30.0 * std::sin(2 * kPi * 0.5 * t);
    c.samples[i] = float(0.2 * std::sin(2 * kPi * f0 * t) + 0.1 * std::sin(2 * kPi * 700.0 * t) +
                         0.05 * std::sin(2 * kPi * 1200.0 * t));
  }
  return c;
}

}  // namespace

void add_encode_audio_command(CLI::App& app) {
  struct Opts {
    std::string mmproj, audio, out;
    double seconds = 29;
    double slice_ms = 0;
    int threads = 0, reps = 3;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("encode-audio", "encode a clip with an mmproj's audio encoder");
  cmd->add_option("--mmproj", o->mmproj, "projector GGUF with an audio encoder")->required();
  cmd->add_option("--audio", o->audio, "audio file (WAV, MP3, FLAC, Ogg)");
  cmd->add_option("--seconds", o->seconds,
                  "a synthetic clip of this length instead (29: one chunk)")
      ->check(CLI::Range(0.01, 3600.0));
  cmd->add_option("-t,--threads", o->threads, "threads (0: one per core)");
  cmd->add_option("-r,--reps", o->reps, "repetitions of each chunk's encode (best is reported)");
  cmd->add_option("--slice-ms", o->slice_ms,
                  "also run the resumable job with this budget per slice; report its slices");
  cmd->add_option("--out", o->out, "write the embeddings, f32 (tokens, n_embd) per chunk in order");
  cmd->callback([o] {
    auto t0 = std::chrono::steady_clock::now();
    const vision::AudioEncoder enc = vision::AudioEncoder::load(o->mmproj);
    const double load_s = seconds_since(t0);
    const vision::AudioConfig& c = enc.config();
    vision::AudioClip clip;
    if (!o->audio.empty()) {
      std::ifstream f(o->audio, std::ios::binary);
      if (!f) throw IoError("cannot open " + o->audio);
      const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(f), {}};
      vision::MediaPolicy policy;
      policy.max_bytes = bytes.size() + 1;
      clip = vision::decode_audio(bytes, vision::AudioOptions{}, policy);
    } else {
      clip = synthetic_clip(o->seconds);
    }
    TaskPool pool(o->threads);
    t0 = std::chrono::steady_clock::now();
    const std::vector<vision::MelChunk> mel = vision::whisper_log_mel(clip.samples, c.mel(), &pool);
    const double mel_s = seconds_since(t0);
    std::printf("%.2f s clip -> %zu chunk(s) of %d tokens (%s), log-mel %.1f ms\n", clip.seconds(),
                mel.size(), enc.tokens_per_chunk(),
                std::string(vision::audio_projector_name(c.projector)).c_str(), mel_s * 1e3);
    // GEMM work of one chunk: 2 * params * rows (attention products added).
    const double F = vision::AudioConfig::kFrames, P = c.n_positions(), D = c.d_model;
    const double gemm = 2.0 * F * 3 * c.n_mel * D + 2.0 * P * 3 * D * D +
                        2.0 * P * c.n_layers * (4 * D * D + 2 * D * c.d_ff) +
                        2.0 * c.n_layers * 2 * P * P * D;
    std::ofstream out;
    if (!o->out.empty()) {
      out.open(o->out, std::ios::binary);
      if (!out) throw IoError("cannot write " + o->out);
    }
    double total = 0;
    for (size_t ch = 0; ch < mel.size(); ++ch) {
      double best = 1e30;
      for (int r = 0; r < std::max(1, o->reps); ++r) {
        t0 = std::chrono::steady_clock::now();
        const vision::Embeddings e = enc.encode_chunk(mel[ch], pool);
        best = std::min(best, seconds_since(t0));
        if (r == 0 && out.is_open())
          out.write(reinterpret_cast<const char*>(e.data.data()),
                    std::streamsize(e.data.size() * sizeof(float)));
      }
      total += best;
      std::printf("chunk %zu: %d x %d in %.1f ms (encoder %.1f GFLOP/s)\n", ch,
                  enc.tokens_per_chunk(), c.d_out, best * 1e3, gemm / best / 1e9);
    }
    std::printf("%s: load %.2f s, %zu chunk(s), encode %.3f s on %d threads\n", o->mmproj.c_str(),
                load_s, mel.size(), total, pool.size());
    if (o->slice_ms > 0) {  // the resumable job, as the server runs it between steps
      vision::AudioEncodeJob job =
          enc.start_encode(std::make_shared<const vision::AudioClip>(std::move(clip)));
      double longest = 0, sum = 0;
      bool done = false;
      while (!done) {
        t0 = std::chrono::steady_clock::now();
        done = job.advance(pool, o->slice_ms);
        const double ms = seconds_since(t0) * 1e3;
        longest = std::max(longest, ms);
        sum += ms;
      }
      std::printf(
          "job: %d stages in %d slices of <= %.0f ms budget: longest %.1f ms, total %.3f s\n",
          job.stages_total(), job.slices(), o->slice_ms, longest, sum / 1e3);
    }
  });
}

}  // namespace tern::cli
