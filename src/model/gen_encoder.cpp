// The encoder cases of the architecture generator ("bert", "nomic-bert",
// the "bert-reranker" and "xlmr-reranker" cross-encoders):
// llama.cpp's tensor names and metadata for its BERT-family converter, a
// WordPiece vocabulary of its own (a few hundred tokens, stored as the
// converter stores BERT's: "▁" before word-initial pieces, "##" dropped from
// continuations, control tokens as they are), seeded weights.
#include "gen_encoder.h"

#include <array>
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "gen_tensors.h"

namespace tern {
namespace {

struct EncoderCase {
  const char* name;
  bool nomic;  // fused QKV, RoPE, SwiGLU, no biases, no position table
  bool xlmr;   // XLM-RoBERTa: the unigram vocabulary (gen_ugm_vocab.cpp), one token type
  int n_layers, d_model, n_heads, d_ff, n_ctx;
  int pooling;  // <arch>.pooling_type: 1 mean, 2 cls, 4 rank
};

// A BERT cross-encoder (bge-reranker / ms-marco MiniLM style) as llama.cpp's
// converter writes one: pooling_type rank and the sequence-classification
// head on the [CLS] row: cls.weight + cls.bias (tanh), then cls.output
// (+ bias) to one logit, the relevance score. An XLM-R cross-encoder
// (bge-reranker-v2-m3 style) is stored the same way, as arch "bert": the
// converter drops the position table's first pad_token_id + 1 rows (so
// positions count from 0, as BERT's) and writes a single token type.
constexpr EncoderCase kEncoderCases[] = {
    {"bert", false, false, 2, 128, 4, 256, 128, 2},
    {"nomic-bert", true, false, 2, 128, 4, 256, 256, 1},
    {"bert-reranker", false, false, 2, 128, 4, 256, 128, 4},
    {"xlmr", false, true, 2, 128, 4, 256, 512, 2},  // bge-m3 style: cls pooling
    {"xlmr-reranker", false, true, 2, 128, 4, 256, 128, 4},
};

const EncoderCase* find_encoder(const std::string& name) {
  for (const EncoderCase& c : kEncoderCases)
    if (name == c.name) return &c;
  return nullptr;
}

// Whole words (word-initial pieces) and continuation pieces ("##ing").
constexpr std::array kWords = {
    "the",   "an",     "of",    "and",    "to",    "in",       "is",      "if",       "it",
    "that",  "was",    "for",   "on",     "are",   "with",     "as",      "be",       "this",
    "by",    "at",     "from",  "or",     "not",   "we",       "you",     "they",     "he",
    "she",   "what",   "which", "who",    "how",   "cat",      "dog",     "sat",      "mat",
    "quick", "brown",  "fox",   "jump",   "over",  "lazy",     "hello",   "world",    "embed",
    "token", "model",  "bert",  "search", "query", "document", "text",    "language", "machine",
    "learn", "vector", "cafe",  "naive",  "paris", "france",   "capital", "city",     "river",
    "water", "sun",    "moon",  "star",   "light", "day",      "night",   "time",     "year",
    "good",  "bad",    "new",   "old",    "big",   "small",    "first",   "last",     "one",
    "two",   "three",  "read",  "write",  "run",   "walk",     "talk",    "un",       "re",
    "play",  "work",   "house", "tree",   "book",  "page",
};
constexpr std::array kPieces = {
    "ing",  "ed", "er",  "ly",  "ies", "es",   "tion", "izer", "ize", "ding", "ness", "ment",
    "able", "al", "est", "ers", "ful", "less", "ity",  "ous",  "ive", "ism",  "ist",  "en",
};

struct GenVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  int32_t pad, unk, cls, sep, mask;
};

GenVocab make_wpm_vocab() {
  GenVocab v;
  auto add = [&](std::string t, int32_t type) {
    v.tokens.push_back(std::move(t));
    v.types.push_back(type);
    return int32_t(v.tokens.size() - 1);
  };
  v.pad = add("[PAD]", 3);
  v.unk = add("[UNK]", 3);
  v.cls = add("[CLS]", 3);
  v.sep = add("[SEP]", 3);
  v.mask = add("[MASK]", 3);
  const std::string start = "\xE2\x96\x81";  // ▁: a word-initial piece
  for (int c = 0x21; c < 0x7F; ++c) {        // punctuation, digits, letters
    const std::string ch(1, char(c));
    add(start + ch, 1);
    if (std::isalnum(c) && !(c >= 'A' && c <= 'Z')) add(ch, 1);  // "##x"
  }
  for (const char* w : kWords) add(start + w, 1);
  for (const char* p : kPieces) add(p, 1);
  for (const char* cjk : {"\xE4\xB8\xAD", "\xE6\x96\x87", "\xE5\xAD\x97"})  // 中 文 字
    add(start + cjk, 1);
  return v;
}

// tokenizer.ggml.* as the converter writes BERT's WordPiece vocabulary;
// returns the vocabulary's size.
// tokenizer.ggml.<name>_token_id for each (name, id), then add_<flag> = true
// for each flag.
void write_specials(gguf::GgufWriter& w, std::initializer_list<std::pair<const char*, int32_t>> ids,
                    std::initializer_list<const char*> add_flags) {
  for (const auto& [name, id] : ids)
    w.set_u32(std::string("tokenizer.ggml.") + name + "_token_id", uint32_t(id));
  for (const char* flag : add_flags) w.set_bool(std::string("tokenizer.ggml.add_") + flag, true);
}

// The vocabulary itself: its model, tokens, their types, the number of
// token types (segments) the encoder has.
void write_tokens(gguf::GgufWriter& w, const char* model, const std::vector<std::string>& tokens,
                  const std::vector<int32_t>& types, uint32_t n_segments) {
  const std::string k = "tokenizer.ggml.";
  w.set_string(k + "model", model);
  w.set_string(k + "pre", "default");
  w.set_string_array(k + "tokens", tokens);
  w.set_i32_array(k + "token_type", types);
  w.set_u32(k + "token_type_count", n_segments);
}

int write_wpm_vocab(gguf::GgufWriter& w) {
  const GenVocab vocab = make_wpm_vocab();
  write_tokens(w, "bert", vocab.tokens, vocab.types, 2);
  write_specials(w,
                 {{"bos", vocab.cls},
                  {"cls", vocab.cls},
                  {"seperator", vocab.sep},
                  {"unknown", vocab.unk},
                  {"padding", vocab.pad},
                  {"mask", vocab.mask}},
                 {"bos_token", "sep_token"});
  w.set_bool("tokenizer.ggml.normalizer.lowercase", true);
  return int(vocab.tokens.size());
}

// ... and XLM-R's unigram one (its tokenizer.json's post-processor
// "<s> $A </s>" / "<s> $A </s> </s> $B </s>" gives add_bos, add_eos and
// add_sep, with </s> as the separator).
int write_ugm_vocab(gguf::GgufWriter& w) {
  const GenUgmVocab vocab = make_ugm_vocab();
  write_tokens(w, "t5", vocab.tokens, vocab.types, 1);
  const std::string k = "tokenizer.ggml.";
  w.set_f32_array(k + "scores", vocab.scores);
  w.set_bool(k + "remove_extra_whitespaces", true);
  w.set_array(k + "precompiled_charsmap",
              std::vector<uint8_t>(vocab.charsmap.begin(), vocab.charsmap.end()));
  write_specials(w,
                 {{"bos", vocab.bos},
                  {"eos", vocab.eos},
                  {"unknown", vocab.unk},
                  {"seperator", vocab.eos},
                  {"padding", vocab.pad},
                  {"cls", vocab.bos},
                  {"mask", vocab.mask}},
                 {"space_prefix", "bos_token", "eos_token", "sep_token"});
  return int(vocab.tokens.size());
}

}  // namespace

bool is_encoder_case(const std::string& name) {
  return find_encoder(name) != nullptr;
}

std::vector<std::string> encoder_cases(bool rankers) {
  std::vector<std::string> v;
  for (const EncoderCase& c : kEncoderCases)
    if ((c.pooling == 4) == rankers) v.push_back(c.name);
  return v;
}

GenArchResult generate_encoder_model(const std::string& name, uint64_t seed, DType weight_type) {
  const EncoderCase& c = *find_encoder(name);
  GenArchResult res;
  gguf::GgufWriter& w = res.writer;
  GenTensors gen(w, seed);
  SeededNormal& rng = gen.rng();
  const std::string arch = c.nomic ? "nomic-bert" : "bert";
  const std::string a = arch + ".";
  const int d = c.d_model, ff = c.d_ff;
  const int n_types = c.xlmr ? 1 : 2;

  w.set_string("general.architecture", arch);
  w.set_string("general.name", std::string("tern-gen-") + c.name);
  w.set_u32(a + "block_count", uint32_t(c.n_layers));
  w.set_u32(a + "context_length", uint32_t(c.n_ctx));
  w.set_u32(a + "embedding_length", uint32_t(d));
  w.set_u32(a + "feed_forward_length", uint32_t(ff));
  w.set_u32(a + "attention.head_count", uint32_t(c.n_heads));
  w.set_f32(a + "attention.layer_norm_epsilon", c.xlmr ? 1e-5f : 1e-12f);
  w.set_bool(a + "attention.causal", false);
  w.set_u32(a + "pooling_type", uint32_t(c.pooling));
  if (c.nomic) w.set_f32(a + "rope.freq_base", 1000.0f);
  const int n_vocab = c.xlmr ? write_ugm_vocab(w) : write_wpm_vocab(w);

  auto add = [&](const std::string& tname, std::vector<int64_t> dims, std::vector<float> v,
                 DType type) { gen.add(tname, std::move(dims), v, type); };
  auto matrix = [&](const std::string& tname, int n_out, int n_in, float gain) {
    gen.matrix(tname, n_out, n_in, gain, weight_type);
  };
  auto vec = [&](const std::string& tname, int n, float mean, float sd) {
    auto v = rng.fill(size_t(n), sd);
    for (float& x : v) x += mean;
    add(tname, {n}, std::move(v), DType::F32);
  };
  auto layer_norm = [&](const std::string& base, int n) {
    vec(base + ".weight", n, 1.0f, 0.1f);
    vec(base + ".bias", n, 0.0f, 0.1f);
  };

  add("token_embd.weight", {d, n_vocab}, rng.fill(size_t(d) * n_vocab, 0.5f), DType::Q8_0);
  add("token_types.weight", {d, n_types}, rng.fill(size_t(d) * n_types, 0.1f), DType::F32);
  if (!c.nomic)
    add("position_embd.weight", {d, c.n_ctx}, rng.fill(size_t(d) * c.n_ctx, 0.2f), DType::F32);
  layer_norm("token_embd_norm", d);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    if (c.nomic) {
      matrix(b + "attn_qkv.weight", 3 * d, d, 1.0f);
    } else {
      for (const char* m : {"attn_q", "attn_k", "attn_v"}) {
        matrix(b + m + ".weight", d, d, 1.0f);
        vec(b + m + ".bias", d, 0.0f, 0.2f);
      }
    }
    matrix(b + "attn_output.weight", d, d, 1.0f);
    if (!c.nomic) vec(b + "attn_output.bias", d, 0.0f, 0.2f);
    layer_norm(b + "attn_output_norm", d);
    matrix(b + "ffn_up.weight", ff, d, 1.0f);
    if (c.nomic) {
      matrix(b + "ffn_gate.weight", ff, d, 1.0f);
    } else {
      vec(b + "ffn_up.bias", ff, 0.0f, 0.2f);
    }
    matrix(b + "ffn_down.weight", d, ff, 1.0f);
    if (!c.nomic) vec(b + "ffn_down.bias", d, 0.0f, 0.2f);
    layer_norm(b + "layer_output_norm", d);
  }
  if (c.pooling == 4) {  // rank: the classification head, F32 as in the fixtures' other heads
    add("cls.weight", {d, d}, rng.fill(size_t(d) * d, 1.0f / std::sqrt(float(d))), DType::F32);
    vec("cls.bias", d, 0.0f, 0.1f);
    add("cls.output.weight", {d, 1}, rng.fill(size_t(d), 1.0f / std::sqrt(float(d))), DType::F32);
    vec("cls.output.bias", 1, 0.0f, 0.1f);
  }
  res.weights_sha256 = gen.sha256();
  return res;
}

}  // namespace tern
