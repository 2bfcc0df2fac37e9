// The architecture oracle's harness: llama.cpp's logits at every position of
// given token sequences, optionally with a LoRA adapter applied. Built by
// scripts/oracle/build_llama_logits.sh against the native llama.cpp peer
// (scripts/build_peer.sh); not part of tern's build.
//
//   llama_logits MODEL PROMPTS.txt OUT.bin [LORA.gguf SCALE]
//   llama_logits MODEL PROMPTS.txt --greedy N
//
// PROMPTS.txt: one prompt a line, token ids separated by spaces. Each prompt
// runs from an empty cache in one batch (flash attention off, f16 KV cache,
// one thread: llama.cpp's defaults otherwise). OUT.bin, little-endian: i32
// n_vocab, i32 n_prompts, then per prompt: i32 n_tokens, f32 logits
// (n_tokens, n_vocab). --greedy N instead prints, per prompt, one line
// "TOKENS t1 t2 ..." and one "MARGINS m1 m2 ..." (top-1 minus top-2 logit at
// each step): the greedy continuation, up to N tokens or end of generation.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

// Decodes `n` tokens at positions from `pos`, logits for the last one only.
bool decode(llama_context* ctx, const llama_token* toks, int32_t n, int32_t pos) {
  llama_batch b = llama_batch_init(n, 0, 1);
  for (int32_t i = 0; i < n; ++i) {
    b.token[i] = toks[i];
    b.pos[i] = pos + i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = i == n - 1;
  }
  b.n_tokens = n;
  const bool ok = llama_decode(ctx, b) == 0;
  llama_batch_free(b);
  return ok;
}

int run_greedy(llama_context* ctx, const llama_vocab* vocab,
               const std::vector<std::vector<llama_token>>& prompts, int max_new) {
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  for (const auto& p : prompts) {
    llama_memory_clear(llama_get_memory(ctx), true);
    if (!decode(ctx, p.data(), int32_t(p.size()), 0)) return 1;
    std::string toks = "TOKENS", margins = "MARGINS";
    for (int i = 0; i < max_new; ++i) {
      const float* z = llama_get_logits_ith(ctx, -1);
      int32_t best = 0;
      for (int32_t v = 1; v < n_vocab; ++v) best = z[v] > z[best] ? v : best;
      float second = -1e30f;
      for (int32_t v = 0; v < n_vocab; ++v) second = v != best && z[v] > second ? z[v] : second;
      toks += " " + std::to_string(best);
      margins += " " + std::to_string(z[best] - second);
      if (llama_vocab_is_eog(vocab, best)) break;
      if (!decode(ctx, &best, 1, int32_t(p.size()) + i)) return 1;
    }
    std::printf("%s\n%s\n", toks.c_str(), margins.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: %s MODEL PROMPTS.txt OUT.bin [LORA.gguf SCALE]\n", argv[0]);
    return 2;
  }
  std::vector<std::vector<llama_token>> prompts;
  std::ifstream in(argv[2]);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ss(line);
    std::vector<llama_token> p;
    for (llama_token t; ss >> t;) p.push_back(t);
    if (!p.empty()) prompts.push_back(p);
  }
  const bool greedy = argc == 5 && std::string(argv[3]) == "--greedy";
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_batch = 256;
  cp.n_ubatch = 256;
  cp.n_threads = cp.n_threads_batch = 1;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  if (argc == 6) {  // LoRA adapter
    llama_adapter_lora* lora = llama_adapter_lora_init(model, argv[4]);
    if (!lora) return 1;
    float scale = float(std::atof(argv[5]));
    if (llama_set_adapters_lora(ctx, &lora, 1, &scale) != 0) return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  if (greedy) return run_greedy(ctx, vocab, prompts, std::atoi(argv[4]));
  FILE* out = std::fopen(argv[3], "wb");
  const int32_t n_prompts = int32_t(prompts.size());
  std::fwrite(&n_vocab, 4, 1, out);
  std::fwrite(&n_prompts, 4, 1, out);
  for (auto& p : prompts) {
    llama_memory_clear(llama_get_memory(ctx), true);
    llama_batch b = llama_batch_init(int32_t(p.size()), 0, 1);
    for (size_t i = 0; i < p.size(); ++i) {
      b.token[i] = p[i];
      b.pos[i] = int32_t(i);
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = 0;
      b.logits[i] = 1;
    }
    b.n_tokens = int32_t(p.size());
    if (llama_decode(ctx, b) != 0) return 1;
    const int32_t n = int32_t(p.size());
    std::fwrite(&n, 4, 1, out);
    for (int32_t i = 0; i < n; ++i)
      std::fwrite(llama_get_logits_ith(ctx, i), 4, size_t(n_vocab), out);
    llama_batch_free(b);
  }
  std::fclose(out);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
