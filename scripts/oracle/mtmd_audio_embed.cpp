// The audio encoder oracle: llama.cpp's Whisper log-mel (libmtmd's
// mtmd_audio_preprocessor_whisper) and audio encoder + projector (clip's
// whisper-enc graph) on the synthetic clips of
// tests/unit/vision/synthetic_audio.h, for one audio mmproj file. Prints a
// JSON object (the shape tests/fixtures/audio/audio_embed.json holds per
// projector type): per clip, per 30 s chunk, a few full rows (kept_rows)
// and the chunk's L2 norm and sum over every value. Built and run by
// scripts/oracle/gen_audio_embed.sh against the peer's libmtmd; not part of
// tern's build.
//
//   mtmd_audio_embed MMPROJ THREADS [CLIP...]   (default: every clip)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "clip-impl.h"
#include "clip.h"
#include "mtmd-audio.h"
#include "synthetic_audio.h"

namespace {

// The rows of a chunk of n tokens the fixture keeps.
std::vector<int> kept_rows(int n) {
  return {0, 1, n / 2, n - 1};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MMPROJ THREADS [CLIP...]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[2]);
  clip_context_params params{};
  params.use_gpu = false;
  params.flash_attn_type = CLIP_FLASH_ATTN_TYPE_DISABLED;
  params.image_min_tokens = -1;
  params.image_max_tokens = -1;
  params.warmup = false;
  clip_ctx* ctx = clip_init(argv[1], params).ctx_a;
  if (!ctx) {
    std::fprintf(stderr, "clip_init found no audio encoder in %s\n", argv[1]);
    return 1;
  }
  mtmd_audio_preprocessor_whisper pre(ctx);
  pre.initialize();
  std::vector<std::string> names;
  for (int i = 3; i < argc; ++i) names.push_back(argv[i]);
  if (names.empty()) names = oracle_audio::names();

  const int n_embd = clip_n_mmproj_embd(ctx);
  std::printf("{\n  \"n_embd\": %d,\n  \"clips\": {", n_embd);
  bool first_clip = true;
  for (const std::string& name : names) {
    const std::vector<float> s = oracle_audio::make(name);
    std::vector<mtmd_audio_mel> mel;
    if (!pre.preprocess(s.data(), s.size(), mel)) {
      std::fprintf(stderr, "%s: preprocess failed\n", name.c_str());
      return 1;
    }
    std::printf("%s\n    \"%s\": [", first_clip ? "" : ",", name.c_str());
    first_clip = false;
    for (size_t c = 0; c < mel.size(); ++c) {
      clip_image_f32_batch batch;  // as mtmd encodes an audio chunk
      batch.is_audio = true;
      batch.entries.emplace_back();
      clip_image_f32& img = batch.entries.back();
      img.set_size({int(mel[c].n_len), int(mel[c].n_mel)}, false, true);
      img.cpy_buf(mel[c].data);
      const int n_tok = clip_n_output_tokens(ctx, &img);
      std::vector<float> emb(size_t(n_tok) * n_embd);
      const auto t0 = std::chrono::steady_clock::now();
      if (!clip_image_batch_encode(ctx, threads, &batch, emb)) {
        std::fprintf(stderr, "%s: encode failed\n", name.c_str());
        return 1;
      }
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "%s chunk %zu: %d tokens, %.1f ms\n", name.c_str(), c, n_tok, ms);
      double sq = 0, sum = 0;
      for (float v : emb) {
        sq += double(v) * v;
        sum += v;
      }
      std::printf("%s\n      {\"tokens\": %d, \"norm\": %.9g, \"sum\": %.9g, \"rows\": {",
                  c ? "," : "", n_tok, std::sqrt(sq), sum);
      const std::vector<int> rows = kept_rows(n_tok);
      for (size_t r = 0; r < rows.size(); ++r) {
        std::printf("%s\n        \"%d\": [", r ? "," : "", rows[r]);
        for (int i = 0; i < n_embd; ++i)
          std::printf("%s%.8g", i ? "," : "", emb[size_t(rows[r]) * n_embd + i]);
        std::printf("]");
      }
      std::printf("}}");
    }
    std::printf("]");
  }
  std::printf("\n  }\n}\n");
  return 0;
}
