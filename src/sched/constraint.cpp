// Builds a sequence's grammar mask. The vocabulary's byte trie is built the
// first time a constrained request meets a tokenizer and shared after that.
#include <map>
#include <mutex>

#include "sequence.h"

namespace tern::sched {
namespace {

std::shared_ptr<const TokenTrie> vocab_trie(const Tokenizer& tok) {
  static std::mutex mu;
  static std::map<const void*, std::shared_ptr<const TokenTrie>> cache;
  // Tokenizer copies share their vocabulary: the address of its first
  // spelling identifies it.
  const void* key = &tok.token_text(0);
  std::lock_guard lock(mu);
  auto& trie = cache[key];
  if (!trie) {
    std::vector<std::string> pieces(size_t(tok.n_vocab()));
    for (int32_t id = 0; id < tok.n_vocab(); ++id)
      if (!tok.is_control(id)) pieces[size_t(id)] = tok.token_to_piece(id);
    trie = std::make_shared<const TokenTrie>(pieces);
  }
  return trie;
}

}  // namespace

std::unique_ptr<JsonConstraint> make_constraint(const SamplingParams& p, const Tokenizer& tok) {
  if (p.response_format == ResponseFormat::Text) return nullptr;
  return JsonConstraint::from_params(p, vocab_trie(tok), tok.eog_ids());
}

}  // namespace tern::sched
