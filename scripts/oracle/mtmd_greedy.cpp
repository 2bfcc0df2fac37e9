// The media-prompt oracle: llama.cpp (libmtmd + libllama) runs a text model
// with its projector on a prompt with images or audio clips and decodes
// greedily, for tern's tests to compare with. Built by scripts/oracle/build_mtmd_embed.sh
// mtmd_greedy against the peer; not part of tern's build.
//
//   mtmd_greedy MODEL MMPROJ THREADS N_PREDICT PROMPT [MEDIA...]
//
// PROMPT holds one <__media__> marker per medium: an image named as in
// synthetic_images.h, or "audio:NAME" for a clip of synthetic_audio.h
// (16 kHz mono samples, given to mtmd as PCM); it is tokenized by
// mtmd_tokenize with BOS and special tokens parsed, like llama-mtmd-cli's
// raw mode. Prints one JSON object: "chunks" (per chunk: text token ids,
// {"image": n_tokens} or {"audio": n_tokens}), "tokens" (the greedy
// continuation) and "margins" (top-1 minus top-2 logit at each step, to tell
// a near-tie from a disagreement).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"
#include "synthetic_audio.h"
#include "synthetic_images.h"

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MODEL MMPROJ THREADS N_PREDICT PROMPT [IMAGE...]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[3]), n_predict = std::atoi(argv[4]);
  const std::string prompt = argv[5];
  llama_backend_init();
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  mtmd_helper_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 4096;
  cp.n_batch = 2048;
  cp.n_ubatch = 2048;
  cp.n_threads = cp.n_threads_batch = threads;
  llama_context* ctx = llama_init_from_model(model, cp);
  mtmd_context_params mp = mtmd_context_params_default();
  mp.n_threads = threads;
  mp.use_gpu = false;
  mp.warmup = false;
  mtmd_context* mctx = mtmd_init_from_file(argv[2], model, mp);
  if (!mctx) return 1;
  std::vector<mtmd_bitmap*> bitmaps;
  for (int i = 6; i < argc; ++i) {
    const std::string name = argv[i];
    if (name.rfind("audio:", 0) == 0) {
      const std::vector<float> pcm = oracle_audio::make(name.substr(6));
      if (pcm.empty()) return 2;
      bitmaps.push_back(mtmd_bitmap_init_from_audio(pcm.size(), pcm.data()));
      continue;
    }
    const oracle_images::Rgb img = oracle_images::make(argv[i]);
    if (img.rgb.empty()) return 2;
    bitmaps.push_back(mtmd_bitmap_init(uint32_t(img.width), uint32_t(img.height), img.rgb.data()));
  }
  mtmd_input_text text{prompt.c_str(), prompt.size(), true, true};
  mtmd_input_chunks* chunks = mtmd_input_chunks_init();
  if (mtmd_tokenize(mctx, chunks, &text, const_cast<const mtmd_bitmap**>(bitmaps.data()),
                    bitmaps.size()) != 0)
    return 1;
  std::printf("{\"chunks\": [");
  for (size_t c = 0; c < mtmd_input_chunks_size(chunks); ++c) {
    const mtmd_input_chunk* ch = mtmd_input_chunks_get(chunks, c);
    std::printf(c ? ", " : "");
    if (mtmd_input_chunk_get_type(ch) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
      size_t n = 0;
      const llama_token* t = mtmd_input_chunk_get_tokens_text(ch, &n);
      std::printf("[");
      for (size_t i = 0; i < n; ++i) std::printf(i ? ", %d" : "%d", t[i]);
      std::printf("]");
    } else {
      const bool audio = mtmd_input_chunk_get_type(ch) == MTMD_INPUT_CHUNK_TYPE_AUDIO;
      std::printf("{\"%s\": %zu}", audio ? "audio" : "image", mtmd_input_chunk_get_n_tokens(ch));
    }
  }
  llama_pos n_past = 0;
  if (mtmd_helper_eval_chunks(mctx, ctx, chunks, 0, 0, 2048, true, &n_past) != 0) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::vector<int> out;
  std::vector<float> margins;
  for (int i = 0; i < n_predict; ++i) {
    const float* l = llama_get_logits_ith(ctx, -1);
    int best = 0;
    for (int v = 1; v < n_vocab; ++v)
      if (l[v] > l[best]) best = v;
    float second = -1e30f;
    for (int v = 0; v < n_vocab; ++v)
      if (v != best) second = std::max(second, l[v]);
    out.push_back(best);
    margins.push_back(l[best] - second);
    llama_token tok = best;
    if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) return 1;
  }
  std::printf("], \"n_pos\": %d, \"tokens\": [", int(n_past));
  for (size_t i = 0; i < out.size(); ++i) std::printf(i ? ", %d" : "%d", out[i]);
  std::printf("], \"margins\": [");
  for (size_t i = 0; i < margins.size(); ++i) std::printf(i ? ", %.4f" : "%.4f", margins[i]);
  std::printf("]}\n");
  mtmd_input_chunks_free(chunks);
  for (auto* b : bitmaps) mtmd_bitmap_free(b);
  mtmd_free(mctx);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
