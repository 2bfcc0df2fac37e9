// A reranker's query-document prompt (rerank_prompt.h).
#include "tern/tokenizer/rerank_prompt.h"

#include <array>

#include "tern/gguf/gguf.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {

RerankPrompt RerankPrompt::from_gguf(const gguf::GgufFile& f, const Tokenizer& tok) {
  RerankPrompt p;
  p.template_ = f.get_string_or("tokenizer.chat_template.rerank", "");
  p.add_bos_ = tok.add_bos_default();
  p.add_eos_ = tok.add_eos_default();  // the file's key, else the model's default (t5: true)
  // llama.cpp's defaults: WordPiece (BERT) vocabularies and these
  // RoBERTa-style pre-tokenizers add SEP between the two texts.
  const std::string_view pre = tok.pre_tokenizer();
  const bool sep_default =
      tok.model() == "bert" || pre == "jina-v1-en" || pre == "jina-v2-code" || pre == "roberta-bpe";
  p.add_sep_ = f.get_bool_or("tokenizer.ggml.add_sep_token", sep_default);
  p.bos_ = tok.bos();
  p.sep_ = int32_t(f.get_int_or("tokenizer.ggml.seperator_token_id", -1));  // llama.cpp's spelling
  p.eos_ = tok.eos() >= 0 ? tok.eos() : p.sep_;
  return p;
}

std::vector<int32_t> RerankPrompt::assemble(const Tokenizer& tok, std::string_view query,
                                            std::string_view doc) const {
  if (!template_.empty()) {
    // The template's text may spell control tokens; the query and document never do.
    std::vector<TextSegment> segs;
    const std::array<std::pair<std::string_view, std::string_view>, 2> holes{
        {{"{query}", query}, {"{document}", doc}}};
    size_t i = 0;
    for (;;) {
      size_t at = std::string::npos;
      const std::pair<std::string_view, std::string_view>* hole = nullptr;
      for (const auto& h : holes) {
        const size_t p = template_.find(h.first, i);
        if (p < at) at = p, hole = &h;
      }
      segs.push_back({template_.substr(i, at == std::string::npos ? at : at - i), true});
      if (!hole) break;
      segs.push_back({std::string(hole->second), false});
      i = at + hole->first.size();
    }
    return tok.encode(segs, /*add_bos=*/false);
  }
  const std::vector<int32_t> q = tok.encode(query, false, false);
  const std::vector<int32_t> d = tok.encode(doc, false, false);
  std::vector<int32_t> out;
  out.reserve(q.size() + d.size() + 4);
  if (add_bos_ && bos_ >= 0) out.push_back(bos_);
  out.insert(out.end(), q.begin(), q.end());
  if (add_eos_ && eos_ >= 0) out.push_back(eos_);
  if (add_sep_ && sep_ >= 0) out.push_back(sep_);
  out.insert(out.end(), d.begin(), d.end());
  if (add_eos_ && eos_ >= 0) out.push_back(eos_);
  return out;
}

std::vector<int32_t> RerankPrompt::encode(const Tokenizer& tok, std::string_view query,
                                          std::string_view doc, int max_tokens, bool truncate,
                                          bool* truncated) const {
  std::vector<int32_t> ids = assemble(tok, query, doc);
  if (truncated) *truncated = false;
  if (max_tokens <= 0 || !truncate || ids.size() <= size_t(max_tokens)) return ids;
  // Cut the document's tokens by the excess and rebuild: re-tokenizing the
  // cut text may merge differently at its end, so repeat until it fits.
  const std::vector<int32_t> d = tok.encode(doc, false, false);
  size_t keep = d.size();
  for (int round = 0; round < 8 && ids.size() > size_t(max_tokens) && keep > 0; ++round) {
    const size_t excess = ids.size() - size_t(max_tokens);
    keep = excess >= keep ? 0 : keep - excess;
    const std::string cut = tok.decode(std::span<const int32_t>(d).first(keep));
    ids = assemble(tok, query, cut);
  }
  if (truncated) *truncated = true;
  return ids;
}

}  // namespace tern
