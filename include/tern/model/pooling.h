#pragma once
// Embeddings from a decoder: the final hidden state (after the output norm,
// before the LM head, what llama.cpp's t_embd holds) of every position of a
// sequence, pooled into one vector: the mean of the rows, the first row
// (cls) or the last row (last). The rows arrive chunk by chunk, in position
// order, so a sequence prefilled over several steps pools exactly as one
// prefilled at once (the sum runs in position order either way).
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tern {

// The values of GGUF's <arch>.pooling_type (llama.cpp: 0 none, 1 mean,
// 2 cls, 3 last, 4 rank). None: not an embedding (a generation). Rank: a
// reranker's score, the model's classification head (model/rank_head.h) on
// the row(s) it pools.
enum class Pooling : uint8_t { None = 0, Mean = 1, Cls = 2, Last = 3, Rank = 4 };

class RankHead;

const char* to_string(Pooling p);
// "mean", "cls", "last", "rank" (and "none"); nullopt for anything else.
std::optional<Pooling> parse_pooling(std::string_view name);

// The pooling embeddings use: `flag` (tern serve/embed --pooling) when
// given, else the file's <arch>.pooling_type, else mean. (llama.cpp, given a
// decoder whose file names no pooling_type, pools nothing: it returns one
// vector per token, which its server refuses on /v1/embeddings. A decoder
// fine-tuned as an embedder carries its pooling in the file, last for
// Qwen3-Embedding; for the rest, mean over every position is the choice
// that does not rest on one token.)
Pooling resolve_pooling(Pooling from_file, std::optional<Pooling> flag);

class Pooler {
 public:
  // p must not be None; Rank needs the model's head (pooling its rows(), the
  // result is the head's outputs), which must outlive the Pooler.
  Pooler(Pooling p, int d, const RankHead* head = nullptr);
  Pooling pooling() const { return pooling_; }
  // The next n positions' rows (n, d), in position order.
  void add(std::span<const float> rows, int n);
  int count() const { return n_; }  // positions seen
  // Whether only the last position's row matters and the earlier positions'
  // KV does not depend on later ones: a causal reranker (Rank whose head
  // reads the last row). Its prompt may then start from a cached prefix
  // (only the last row must be computed) and publish its KV: the documents
  // of one query share the prompt up to the document.
  bool reuses_prefix() const { return pooling_ == Pooling::Rank && rows_ == Pooling::Last; }
  void reset();  // forget every row (the sequence is recomputed)
  // The pooled vector (d), or for Rank the head's outputs (n_out); needs count() > 0.
  std::vector<float> result() const;

 private:
  Pooling pooling_;
  Pooling rows_;  // how rows are pooled: pooling_, or the head's for Rank
  const RankHead* head_ = nullptr;
  int d_;
  int n_ = 0;
  std::vector<double> sum_;  // Mean: (d) the rows' sum
  std::vector<float> row_;   // Cls: the first row; Last: the latest
};

// v /= ||v||_2 (llama.cpp's --embd-normalize 2); a zero vector stays zero.
void l2_normalize(std::span<float> v);

// What an embeddings API returns for a pooled vector: its first `dims`
// values (all when dims <= 0 or >= its size: OpenAI's `dimensions`, the
// Matryoshka truncation), L2-normalised after the cut when `normalize`.
std::vector<float> finish_embedding(std::span<const float> pooled, int dims, bool normalize);

}  // namespace tern
