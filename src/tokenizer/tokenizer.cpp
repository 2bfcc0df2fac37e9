// Tokenizer: special-token partitioning, dispatch to BPE / SentencePiece,
// pieces and detokenization (see tokenizer.h).
// Dispatch to BPE, SentencePiece, WordPiece or unigram.
#include "tern/tokenizer/tokenizer.h"

#include <algorithm>

#include "tern/core/error.h"
#include "vocab.h"

namespace tern {
namespace {

using detail::Vocab;

// A run of the input: either raw text [begin, end) or one special token.
struct Fragment {
  int32_t token;  // -1 for raw text
  size_t begin;
  size_t end;
};

// Byte ranges [first, second) of the text where control tokens may be parsed,
// sorted and disjoint.
using Ranges = std::vector<std::pair<size_t, size_t>>;

bool inside(const Ranges& ranges, size_t begin, size_t end) {
  for (const auto& [b, e] : ranges) {
    if (b <= begin && end <= e) return true;
  }
  return false;
}

// Cuts the spellings of special tokens out of the raw fragments, longest
// spelling first, leftmost occurrences first (llama.cpp's tokenizer_st_partition).
// User-defined tokens are cut anywhere; control and unknown tokens only inside
// `parse` ranges.
std::vector<Fragment> partition(const Vocab& v, std::string_view text, const Ranges& parse) {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int32_t id : v.special_tokens) {
    const bool control = v.attr[id] & (detail::kAttrControl | detail::kAttrUnknown);
    if (control && parse.empty()) continue;
    const std::string& sp = v.text[id];
    if (sp.empty()) continue;
    bool changed = false;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view hay = text.substr(0, f.end);
      size_t pos = f.begin;  // start of the raw text not yet emitted
      for (size_t from = f.begin; from < f.end;) {
        const size_t hit = hay.find(sp, from);
        if (hit == std::string_view::npos) break;
        if (control && !inside(parse, hit, hit + sp.size())) {
          from = hit + 1;  // literal text here: look further on
          continue;
        }
        if (hit > pos) next.push_back({-1, pos, hit});
        next.push_back({id, hit, hit + sp.size()});
        pos = from = hit + sp.size();
        changed = true;
      }
      if (pos < f.end) next.push_back({-1, pos, f.end});
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

std::string escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      out += "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// llama.cpp's clean_spaces post-processing of detokenized text, ported pass by
// pass (in place, with its exact quirks): drop the space before ? ! . , ;
// turn " ' " into "'"; drop the space before 's 'm 're 've.
void clean_spaces(std::string& s) {
  char* text = s.data();
  const int n = static_cast<int>(s.size());

  int total = n ? 1 : 0;
  for (int i = 1; i < n; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
    text[total++] = x;
  }

  const int total2 = total;
  total = total ? 1 : 0;
  for (int i = 1; i < total2; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
      total--;
      text[++i] = '\0';
    }
    text[total++] = x;
  }

  const int total3 = total;
  total = total ? 1 : 0;
  for (int i = 1; i < total3; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        total--;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < total3) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
      }
    }
    text[total++] = x;
  }
  s.resize(total);
}

std::vector<int32_t> encode_text(const Vocab& v, std::string_view text, bool add_bos,
                                 const Ranges& parse) {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  // WordPiece: llama.cpp wraps every text in [CLS] ... [SEP] when asked for
  // the special tokens, whatever add_bos_token says.
  const bool wpm = v.type == Vocab::Type::kWpm;
  if (add_bos && (v.add_bos || wpm)) out.push_back(v.bos);
  const std::vector<Fragment> frags = partition(v, text, parse);
  bool prev_special =
      true;  // SentencePiece: a space prefix starts the text and follows special tokens
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.begin, f.end - f.begin);
    if (v.type == Vocab::Type::kBpe) {
      detail::bpe_encode(v, raw, out);
    } else if (wpm) {
      detail::wpm_encode(v, raw, out);
    } else if (v.type == Vocab::Type::kUgm) {
      detail::ugm_encode(v, raw, out);  // normalises and adds its own space prefix
    } else {
      std::string prefixed = (v.add_space_prefix && prev_special) ? " " : "";
      prefixed.append(raw);
      detail::spm_encode(v, escape_spaces(prefixed), out);
      prev_special = false;
    }
  }
  if (add_bos && wpm) {
    out.push_back(v.sep);
  } else if (add_bos && v.add_eos) {
    out.push_back(v.eos);
  }
  return out;
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  Ranges parse;
  if (parse_special) parse.emplace_back(0, text.size());
  return encode_text(*vocab_, text, add_bos, parse);
}

std::vector<int32_t> Tokenizer::encode(std::span<const TextSegment> segments, bool add_bos) const {
  std::string text;
  Ranges parse;
  for (const TextSegment& s : segments) {
    if (s.parse_special && !s.text.empty()) {
      if (!parse.empty() && parse.back().second == text.size()) {
        parse.back().second += s.text.size();  // adjacent parsed segments form one range
      } else {
        parse.emplace_back(text.size(), text.size() + s.text.size());
      }
    }
    text += s.text;
  }
  return encode_text(*vocab_, text, add_bos, parse);
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  const Vocab& v = *vocab_;
  if (!v.valid(id)) return {};
  if (!render_special && (v.attr[id] & (detail::kAttrUnknown | detail::kAttrControl))) return {};
  return v.piece[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  const Vocab& v = *vocab_;
  std::string out;
  bool strip_space = v.add_space_prefix;  // only the first piece loses its leading space
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id, render_special);
    if (strip_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  if (v.pre.clean_spaces) clean_spaces(out);
  return out;
}

int32_t Tokenizer::n_vocab() const {
  return vocab_->n_tokens();
}
int32_t Tokenizer::bos() const {
  return vocab_->bos;
}
int32_t Tokenizer::eos() const {
  return vocab_->eos;
}
int32_t Tokenizer::eot() const {
  return vocab_->eot;
}
int32_t Tokenizer::unk() const {
  return vocab_->unk;
}
bool Tokenizer::add_bos_default() const {
  return vocab_->add_bos;
}
bool Tokenizer::add_eos_default() const {
  return vocab_->add_eos;
}

bool Tokenizer::is_eog(int32_t id) const {
  return vocab_->valid(id) && vocab_->eog[id];
}

std::vector<int32_t> Tokenizer::eog_ids() const {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab_->n_tokens(); ++id) {
    if (vocab_->eog[id]) ids.push_back(id);
  }
  return ids;
}

bool Tokenizer::is_control(int32_t id) const {
  return vocab_->valid(id) && (vocab_->attr[id] & detail::kAttrControl);
}

TokenType Tokenizer::token_type(int32_t id) const {
  if (!vocab_->valid(id)) return TokenType::kUndefined;
  const uint16_t a = vocab_->attr[id];
  if (a & detail::kAttrControl) return TokenType::kControl;
  if (a & detail::kAttrUserDefined) return TokenType::kUserDefined;
  if (a & detail::kAttrUnknown) return TokenType::kUnknown;
  if (a & detail::kAttrByte) return TokenType::kByte;
  if (a & detail::kAttrUnused) return TokenType::kUnused;
  if (a & detail::kAttrNormal) return TokenType::kNormal;
  return TokenType::kUndefined;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view text) const {
  const int32_t id = vocab_->find(text);
  if (id < 0) return std::nullopt;
  return id;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  if (!vocab_->valid(id)) {
    throw InvalidArgument("token id " + std::to_string(id) + " is out of range (vocabulary of " +
                          std::to_string(vocab_->n_tokens()) + ")");
  }
  return vocab_->text[id];
}

std::string_view Tokenizer::model() const {
  return vocab_->model;
}
std::string_view Tokenizer::pre_tokenizer() const {
  return vocab_->pre_name;
}

}  // namespace tern
