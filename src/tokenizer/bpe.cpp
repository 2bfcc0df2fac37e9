// Byte-level BPE (GPT-2 style), one text fragment at a time:
//   1. the pre-tokenizer splits the fragment into words;
//   2. each word's UTF-8 bytes are spelled with the GPT-2 byte<->unicode map
//      (every byte becomes one printable codepoint, e.g. ' ' -> 'Ġ');
//   3. starting from single characters, the adjacent pair with the lowest
//      merge rank is merged until no ranked pair is left (ties: leftmost);
//   4. each resulting symbol is looked up in the vocabulary (a symbol that is
//      not a token falls back to its single-byte pieces, as llama.cpp does).
#include <algorithm>
#include <array>
#include <queue>

#include "tern/tokenizer/tokenizer.h"
#include "tern/tokenizer/unicode.h"
#include "vocab.h"

namespace tern::detail {
namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the
// other 68 bytes to U+0100.. in byte order.
constexpr std::array<uint16_t, 256> make_byte_to_cp() {
  std::array<uint16_t, 256> map{};
  uint16_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable =
        (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    map[b] = printable ? static_cast<uint16_t>(b) : next++;
  }
  return map;
}
constexpr std::array<uint16_t, 256> kByteToCp = make_byte_to_cp();

// Inverse of kByteToCp over U+0000..U+0143; -1 where no byte maps.
constexpr std::array<int16_t, 324> make_cp_to_byte() {
  std::array<int16_t, 324> inv{};
  for (auto& v : inv) v = -1;
  for (int b = 0; b < 256; ++b) inv[kByteToCp[b]] = static_cast<int16_t>(b);
  return inv;
}
constexpr std::array<int16_t, 324> kCpToByte = make_cp_to_byte();

struct Symbol {
  int prev;
  int next;
  uint32_t start;  // byte offset in the encoded word
  uint32_t len;    // 0 once merged into its left neighbour
};

struct Bigram {
  int rank;
  int left;
  int right;
  uint32_t len;  // left.len + right.len when queued; a mismatch later means stale
};

struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);  // min rank, then leftmost
  }
};

class WordMerger {
 public:
  WordMerger(const Vocab& vocab, std::string_view word) : vocab_(vocab), word_(word) {}

  void run(std::vector<int32_t>& out) {
    for (uint32_t off = 0; off < word_.size();) {
      const auto n = static_cast<uint32_t>(std::min<size_t>(
          unicode::utf8_len(static_cast<uint8_t>(word_[off])), word_.size() - off));
      const int idx = static_cast<int>(symbols_.size());
      symbols_.push_back({idx - 1, off + n == word_.size() ? -1 : idx + 1, off, n});
      off += n;
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) queue_pair(i - 1, i);
    while (!queue_.empty()) {
      const Bigram bg = queue_.top();
      queue_.pop();
      Symbol& l = symbols_[bg.left];
      Symbol& r = symbols_[bg.right];
      if (l.len == 0 || r.len == 0 || l.len + r.len != bg.len) continue;  // stale
      l.len += r.len;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) symbols_[r.next].prev = bg.left;
      queue_pair(l.prev, bg.left);
      queue_pair(bg.left, l.next);
    }
    for (const Symbol& s : symbols_) {
      if (s.len == 0) continue;
      const std::string_view text = word_.substr(s.start, s.len);
      const int32_t id = vocab_.find(text);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      for (char c : text) {  // not a token: its single bytes, where they are tokens
        const int32_t b = vocab_.find(std::string_view(&c, 1));
        if (b >= 0) out.push_back(b);
      }
    }
  }

 private:
  void queue_pair(int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols_[left];
    const Symbol& r = symbols_[right];
    key_.assign(word_.substr(l.start, l.len));
    key_.push_back(' ');
    key_.append(word_.substr(r.start, r.len));
    const auto it = vocab_.merge_rank.find(std::string_view(key_));
    if (it == vocab_.merge_rank.end()) return;
    queue_.push({it->second, left, right, l.len + r.len});
  }

  const Vocab& vocab_;
  std::string_view word_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
  std::string key_;
};

std::string byte_encode(std::string_view word) {
  std::string out;
  out.reserve(word.size() * 2);
  for (char c : word) unicode::append_utf8(out, kByteToCp[static_cast<uint8_t>(c)]);
  return out;
}

}  // namespace

void bpe_encode(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  for (const std::string& word : pre_tokenize(vocab.pre.kind, text)) {
    const std::string encoded = byte_encode(word);
    if (vocab.pre.ignore_merges) {
      const int32_t id = vocab.find(encoded);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    WordMerger(vocab, encoded).run(out);
  }
}

std::string bpe_decode_text(std::string_view token_text) {
  std::string out;
  out.reserve(token_text.size());
  for (uint32_t cp : unicode::decode_utf8_lenient(token_text)) {
    if (cp < kCpToByte.size() && kCpToByte[cp] >= 0) {
      out.push_back(static_cast<char>(kCpToByte[cp]));
      continue;
    }
    // Not a byte-level spelling: llama.cpp marks it like this.
    std::string utf8;
    unicode::append_utf8(utf8, cp);
    static constexpr char kHex[] = "0123456789abcdef";
    out += "[UNK_BYTE_0x";
    for (char c : utf8) {
      out.push_back(kHex[static_cast<uint8_t>(c) >> 4]);
      out.push_back(kHex[static_cast<uint8_t>(c) & 15]);
    }
    out.append(token_text);
    out += "]";
  }
  return out;
}

}  // namespace tern::detail

namespace tern {

std::string byte_level_spelling(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) unicode::append_utf8(out, detail::kByteToCp[b]);
  return out;
}

}  // namespace tern
