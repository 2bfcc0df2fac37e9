#pragma once
// A byte trie of a vocabulary's token strings, built once per vocabulary and
// shared (immutable) by every constrained sequence. allowed() walks it
// together with a JsonMatcher: each trie edge advances a copy of the matcher
// by one byte, and an edge the grammar refuses prunes the whole subtree, so
// one traversal visits only the prefixes the grammar can still accept.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tern/sampling/json_matcher.h"

namespace tern {

class TokenTrie {
 public:
  // pieces[id] = the bytes token id stands for; "" = never allowed by a mask
  // (control tokens: the caller decides about end-of-generation tokens).
  explicit TokenTrie(std::span<const std::string> pieces);

  int32_t n_vocab() const { return n_vocab_; }
  const std::string& piece(int32_t id) const { return pieces_[size_t(id)]; }
  size_t n_nodes() const { return nodes_.size(); }

  // Per-sequence buffers for allowed(): one matcher per trie depth.
  struct Scratch {
    std::vector<JsonMatcher> level;
  };

  // allowed[id] = 1 for every token whose bytes m accepts (m unchanged), 0
  // otherwise. allowed.size() must be n_vocab(). Returns how many are allowed.
  size_t allowed(const JsonMatcher& m, std::span<uint8_t> allowed, Scratch& scratch) const;

 private:
  struct Node {
    uint32_t first_child = 0, n_children = 0;  // into child_byte_ / child_node_
    uint32_t first_token = 0, n_tokens = 0;    // into tokens_: ids ending here
    uint32_t end_token = 0;                    // tokens_[first_token, end_token): the whole subtree
    // Longest path below when every byte below is plain string ASCII (see
    // JsonMatcher::plain_string_room), else kNotPlain.
    uint32_t plain_depth = 0;
  };
  static constexpr uint32_t kNotPlain = 0xFFFFFFFF;
  uint32_t build(std::span<const std::string> pieces, std::vector<int32_t>& ids, size_t lo,
                 size_t hi, size_t depth);
  size_t walk(uint32_t node, size_t depth, std::span<uint8_t> allowed, Scratch& scratch) const;

  int32_t n_vocab_ = 0;
  std::vector<std::string> pieces_;  // (n_vocab)
  size_t max_len_ = 0;
  std::vector<Node> nodes_;
  std::vector<uint8_t> child_byte_;
  std::vector<uint32_t> child_node_;
  std::vector<int32_t> tokens_;
};

}  // namespace tern
