// SentencePiece-style BPE over token scores (llama.cpp's "llama" vocab type):
// start from single UTF-8 characters and repeatedly merge the adjacent pair
// whose concatenation is the vocabulary token with the highest score (ties:
// leftmost). A final symbol that is not a token falls back to byte tokens
// <0xXX> (or the unknown token when the vocabulary has no byte tokens).
#include <algorithm>
#include <queue>

#include "tern/tokenizer/unicode.h"
#include "vocab.h"

namespace tern::detail {
namespace {

struct Symbol {
  int prev;
  int next;
  uint32_t start;
  uint32_t len;  // 0 once merged into its left neighbour
};

struct Bigram {
  float score;
  int left;
  int right;
  uint32_t len;
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score ||
           (a.score == b.score && a.left > b.left);  // max score, then leftmost
  }
};

int32_t byte_token(const Vocab& vocab, uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char spelled[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  int32_t id = vocab.find(std::string_view(spelled, 6));
  if (id < 0) id = vocab.find(std::string_view(reinterpret_cast<const char*>(&byte), 1));
  return id >= 0 ? id : vocab.unk;
}

}  // namespace

void spm_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Symbol> symbols;
  for (uint32_t off = 0; off < text.size();) {
    const auto n = static_cast<uint32_t>(
        std::min<size_t>(unicode::utf8_len(static_cast<uint8_t>(text[off])), text.size() - off));
    const int idx = static_cast<int>(symbols.size());
    symbols.push_back({idx - 1, off + n == text.size() ? -1 : idx + 1, off, n});
    off += n;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  const auto queue_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const int32_t id = vocab.find(text.substr(l.start, l.len + r.len));
    if (id < 0) return;
    queue.push({vocab.score[id], left, right, l.len + r.len});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) queue_pair(i - 1, i);

  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& l = symbols[bg.left];
    Symbol& r = symbols[bg.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = bg.left;
    queue_pair(l.prev, bg.left);
    queue_pair(bg.left, l.next);
  }

  for (const Symbol& s : symbols) {
    if (s.len == 0) continue;
    const std::string_view piece = text.substr(s.start, s.len);
    const int32_t id = vocab.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Merges only ever form tokens, so this is a single character not in the vocabulary.
    for (char c : piece) {
      const int32_t b = byte_token(vocab, static_cast<uint8_t>(c));
      if (b >= 0) out.push_back(b);
    }
  }
}

}  // namespace tern::detail
