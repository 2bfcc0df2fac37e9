#include "tern/sampling/token_trie.h"

#include <algorithm>

namespace tern {

TokenTrie::TokenTrie(std::span<const std::string> pieces)
    : n_vocab_(int32_t(pieces.size())), pieces_(pieces.begin(), pieces.end()) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < n_vocab_; ++i)
    if (!pieces[size_t(i)].empty()) ids.push_back(i);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return pieces[size_t(a)] != pieces[size_t(b)] ? pieces[size_t(a)] < pieces[size_t(b)] : a < b;
  });
  for (int32_t i : ids) max_len_ = std::max(max_len_, pieces[size_t(i)].size());
  build(pieces, ids, 0, ids.size(), 0);
}

// ids[lo, hi) are sorted and share their first `depth` bytes: one node for
// that prefix, children for each next byte (laid out contiguously).
uint32_t TokenTrie::build(std::span<const std::string> pieces, std::vector<int32_t>& ids, size_t lo,
                          size_t hi, size_t depth) {
  const uint32_t idx = uint32_t(nodes_.size());
  nodes_.push_back({});
  size_t i = lo;
  nodes_[idx].first_token = uint32_t(tokens_.size());
  for (; i < hi && pieces[size_t(ids[i])].size() == depth; ++i) tokens_.push_back(ids[i]);
  nodes_[idx].n_tokens = uint32_t(tokens_.size()) - nodes_[idx].first_token;
  std::vector<std::pair<size_t, size_t>> groups;
  while (i < hi) {
    const char b = pieces[size_t(ids[i])][depth];
    size_t j = i;
    while (j < hi && pieces[size_t(ids[j])][depth] == b) ++j;
    groups.push_back({i, j});
    i = j;
  }
  const uint32_t first = uint32_t(child_byte_.size());
  nodes_[idx].first_child = first;
  nodes_[idx].n_children = uint32_t(groups.size());
  child_byte_.resize(first + groups.size());
  child_node_.resize(first + groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    child_byte_[first + g] = uint8_t(pieces[size_t(ids[groups[g].first])][depth]);
    const uint32_t c = build(pieces, ids, groups[g].first, groups[g].second, depth + 1);
    child_node_[first + g] = c;
    const uint8_t b = child_byte_[first + g];
    const bool plain = b >= 0x20 && b < 0x80 && b != '"' && b != '\\';
    uint32_t& pd = nodes_[idx].plain_depth;
    if (!plain || nodes_[c].plain_depth == kNotPlain)
      pd = kNotPlain;
    else if (pd != kNotPlain)
      pd = std::max(pd, nodes_[c].plain_depth + 1);
  }
  nodes_[idx].end_token = uint32_t(tokens_.size());
  return idx;
}

size_t TokenTrie::allowed(const JsonMatcher& m, std::span<uint8_t> allowed,
                          Scratch& scratch) const {
  std::fill(allowed.begin(), allowed.end(), uint8_t(0));
  if (scratch.level.size() < max_len_ + 1) scratch.level.resize(max_len_ + 1, m);
  scratch.level[0] = m;
  return walk(0, 0, allowed, scratch);
}

size_t TokenTrie::walk(uint32_t node, size_t depth, std::span<uint8_t> allowed,
                       Scratch& scratch) const {
  const Node& n = nodes_[node];
  size_t count = 0;
  const JsonMatcher& here = scratch.level[depth];
  JsonMatcher& next = scratch.level[depth + 1];
  const uint32_t room = here.plain_string_room();
  for (uint32_t c = n.first_child; c < n.first_child + n.n_children; ++c) {
    const Node& sub = nodes_[child_node_[c]];
    if (room > 0 && sub.plain_depth != kNotPlain && sub.plain_depth < room) {
      const uint8_t b = child_byte_[c];
      if (b >= 0x20 && b < 0x80 && b != '"' && b != '\\') {
        // Inside a string, a subtree of plain characters is all allowed.
        for (uint32_t t = sub.first_token; t < sub.end_token; ++t) allowed[size_t(tokens_[t])] = 1;
        count += sub.end_token - sub.first_token;
        continue;
      }
    }
    if (!here.advance_into(child_byte_[c], next)) continue;  // prune the subtree
    const Node& child = nodes_[child_node_[c]];
    for (uint32_t t = child.first_token; t < child.first_token + child.n_tokens; ++t) {
      allowed[size_t(tokens_[t])] = 1;
      ++count;
    }
    count += walk(child_node_[c], depth + 1, allowed, scratch);
  }
  return count;
}

}  // namespace tern
