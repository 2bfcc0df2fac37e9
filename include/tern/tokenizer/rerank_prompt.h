#pragma once
// The prompt a reranker scores: a query and one document, as llama.cpp's
// server builds it (format_prompt_rerank).
//
//  - With a rerank template (the GGUF's tokenizer.chat_template.rerank, which
//    llama.cpp's converter writes for Qwen3-Reranker): the template with
//    {query} and {document} replaced, tokenized without BOS/EOS, its own
//    control-token spellings parsed. Unlike llama.cpp, the query's and the
//    document's text is never read as control tokens (a document containing
//    "<|im_end|>" stays text); for text without such spellings the ids are
//    the same.
//  - Without one (BERT-style cross-encoders): [BOS] query [EOS] [SEP] doc [EOS],
//    each marker present when the vocabulary adds it (add_bos_token,
//    add_eos_token, add_sep_token; EOS falls back to SEP when there is no
//    EOS), the texts tokenized without special tokens.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

namespace gguf {
class GgufFile;
}
class Tokenizer;

class RerankPrompt {
 public:
  static RerankPrompt from_gguf(const gguf::GgufFile& f, const Tokenizer& tok);

  const std::string& rerank_template() const { return template_; }  // "" when none

  // The prompt's token ids. When it is longer than max_tokens (> 0) and
  // `truncate`, the document's end is cut until it fits (truncated set);
  // otherwise it is returned whole (the caller refuses it). A query too long
  // to leave any room for the document is returned whole too.
  std::vector<int32_t> encode(const Tokenizer& tok, std::string_view query, std::string_view doc,
                              int max_tokens = 0, bool truncate = false,
                              bool* truncated = nullptr) const;

 private:
  std::vector<int32_t> assemble(const Tokenizer& tok, std::string_view query,
                                std::string_view doc) const;

  std::string template_;
  bool add_bos_ = false, add_eos_ = false, add_sep_ = false;
  int32_t bos_ = -1, eos_ = -1, sep_ = -1;
};

}  // namespace tern
