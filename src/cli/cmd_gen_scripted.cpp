// tern gen-scripted-model: writes a tiny llama-architecture GGUF whose greedy
// output after any ChatML prompt is a given sequence of tokens, then the end
// of turn. It is a real model file run by the real engine — one layer whose
// attention and FFN outputs are zero, so the residual stream is the current
// token's embedding, and an output head that maps each script token's
// embedding to the next one. Embeddings of the script tokens are orthogonal
// (Hadamard rows), so the wanted token wins by the whole norm. Tests use it to
// drive output-side features (reasoning tags, tool-call markup) through the
// engine without a large model.
#include <algorithm>
#include <cstdio>
#include <random>
#include <set>

#include "commands.h"
#include "tern/core/error.h"
#include "tern/gguf/gguf_writer.h"
#include "tern/kernels/dequant.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern::cli {
namespace {

constexpr int kDim = 64;  // n_embd: at most 63 script tokens besides the start

std::vector<std::string> split_script(const std::string& script) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t bar = script.find('|', start);
    out.push_back(script.substr(start, bar - start));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return out;
}

// "\n" and "\t" escapes, so a script can hold newlines on a command line.
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't')) {
      out += s[++i] == 'n' ? '\n' : '\t';
    } else {
      out += s[i];
    }
  }
  return out;
}

void write_scripted_model(const std::string& script, const std::string& path) {
  // Vocabulary: three control tokens, the 256 bytes, then each script token
  // that is not a single byte ("<...>" ones user-defined, as added tokens are).
  std::vector<std::string> toks = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<int32_t> types = {3, 3, 3};
  for (int b = 0; b < 256; ++b) {
    toks.push_back(byte_level_spelling(std::string(1, char(b))));
    types.push_back(1);
  }
  auto find = [&](const std::string& t) {
    auto it = std::find(toks.begin(), toks.end(), t);
    return it == toks.end() ? -1 : int(it - toks.begin());
  };
  const int start = find(byte_level_spelling("\n"));  // the generation prompt ends "assistant\n"
  std::vector<int> chain = {start};
  for (const std::string& raw : split_script(script)) {
    const std::string t = unescape(raw);
    if (t.empty()) throw InvalidArgument("--script: empty token (two '|' in a row?)");
    const bool added = t.size() > 2 && t.front() == '<' && t.back() == '>';
    const std::string spelled = added ? t : byte_level_spelling(t);
    int id = find(spelled);
    if (id < 0) {
      id = int(toks.size());
      toks.push_back(spelled);
      types.push_back(added ? 4 : 1);
    }
    if (std::count(chain.begin(), chain.end(), id))
      throw InvalidArgument("--script: token '" + raw +
                            "' appears twice (or is the newline that starts the output); the "
                            "model's next token depends only on the current one");
    chain.push_back(id);
  }
  if (chain.size() > size_t(kDim))
    throw InvalidArgument("--script: at most " + std::to_string(kDim - 1) + " tokens");
  const int n_vocab = int(toks.size()), eot = 2;

  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "scripted");
  w.set_u32("llama.block_count", 1);
  w.set_u32("llama.embedding_length", kDim);
  w.set_u32("llama.feed_forward_length", 128);
  w.set_u32("llama.attention.head_count", 4);
  w.set_u32("llama.attention.head_count_kv", 4);
  w.set_u32("llama.context_length", 2048);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "smollm");
  w.set_string_array("tokenizer.ggml.tokens", toks);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", {});
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", uint32_t(eot));
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string("tokenizer.chat_template",
               "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
               "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
               "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");

  // Embeddings: Hadamard rows for the chain (mutually orthogonal), random
  // signs for every other token.
  std::mt19937 rng(7);
  std::vector<float> embd(size_t(n_vocab) * kDim);
  for (int t = 0; t < n_vocab; ++t)
    for (int j = 0; j < kDim; ++j) embd[size_t(t) * kDim + j] = (rng() & 1) ? 1.0f : -1.0f;
  for (size_t k = 0; k < chain.size(); ++k)
    for (int j = 0; j < kDim; ++j)
      embd[size_t(chain[k]) * kDim + j] =
          (__builtin_popcount(unsigned(k + 1) & unsigned(j)) & 1) ? -1.0f : 1.0f;
  // The head: row next(t) is t's embedding; the last token leads to the end of turn.
  std::vector<float> head(size_t(n_vocab) * kDim, 0.0f);
  for (size_t k = 0; k < chain.size(); ++k) {
    const int next = k + 1 < chain.size() ? chain[k + 1] : eot;
    std::copy_n(&embd[size_t(chain[k]) * kDim], kDim, &head[size_t(next) * kDim]);
  }
  auto add = [&](const std::string& n, std::vector<int64_t> dims, const std::vector<float>& v) {
    w.add_tensor(n, DType::Q8_0, dims, kernels::quantize_ref(DType::Q8_0, v));
  };
  auto zeros = [](size_t n) { return std::vector<float>(n, 0.0f); };
  auto noise = [&](size_t n) {
    std::normal_distribution<float> d(0.0f, 0.1f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  };
  const std::vector<float> ones(kDim, 1.0f);
  add("token_embd.weight", {kDim, n_vocab}, embd);
  add("output.weight", {kDim, n_vocab}, head);
  w.add_tensor_f32("output_norm.weight", {kDim}, ones);
  w.add_tensor_f32("blk.0.attn_norm.weight", {kDim}, ones);
  w.add_tensor_f32("blk.0.ffn_norm.weight", {kDim}, ones);
  add("blk.0.attn_q.weight", {kDim, kDim}, noise(kDim * kDim));
  add("blk.0.attn_k.weight", {kDim, kDim}, noise(kDim * kDim));
  add("blk.0.attn_v.weight", {kDim, kDim}, noise(kDim * kDim));
  add("blk.0.attn_output.weight", {kDim, kDim}, zeros(kDim * kDim));
  add("blk.0.ffn_gate.weight", {kDim, 128}, noise(kDim * 128));
  add("blk.0.ffn_up.weight", {kDim, 128}, noise(kDim * 128));
  add("blk.0.ffn_down.weight", {128, kDim}, zeros(128 * kDim));
  w.write(path);
  std::printf("%s: %d tokens scripted, vocabulary of %d\n", path.c_str(), int(chain.size()) - 1,
              n_vocab);
}

}  // namespace

void add_gen_scripted_command(CLI::App& app) {
  struct Opts {
    std::string script, out;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "gen-scripted-model",
      "write a tiny model whose greedy reply to any chat is a given token sequence (for tests)");
  cmd->add_option("--script", o->script,
                  "the reply's tokens separated by '|' (\\n for a newline; '<...>' tokens are "
                  "added to the vocabulary whole), e.g. '<think>|Hmm|</think>|Hi'")
      ->required();
  cmd->add_option("--out", o->out, "output file")->required();
  cmd->callback([o] { write_scripted_model(o->script, o->out); });
}

}  // namespace tern::cli
