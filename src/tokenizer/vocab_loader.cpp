// Builds a Vocab from tokenizer metadata (VocabSpec), following llama.cpp's
// vocabulary loader: model defaults, metadata overrides, token attributes,
// special-token detection by spelling, end-of-generation set, piece cache.
#include <algorithm>
#include <array>
#include <cstdlib>

#include "tern/core/error.h"
#include "tern/core/log.h"
#include "tern/gguf/gguf_file.h"
#include "tern/tokenizer/tokenizer.h"
#include "vocab.h"

namespace tern {
namespace detail {
namespace {

uint16_t attr_from_type(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kNormal:
      return kAttrNormal;
    case TokenType::kUnknown:
      return kAttrUnknown;
    case TokenType::kControl:
      return kAttrControl;
    case TokenType::kUserDefined:
      return kAttrUserDefined;
    case TokenType::kUnused:
      return kAttrUnused;
    case TokenType::kByte:
      return kAttrByte;
    default:
      return kAttrUndefined;
  }
}

// Spellings that mark special tokens when the metadata does not name them.
// The first spelling present in the vocabulary wins (llama.cpp takes whichever
// its hash map yields first; a fixed priority keeps tern deterministic).
constexpr std::array<std::string_view, 11> kEotSpellings = {
    "<|eot_id|>",        "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",   "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>"};
constexpr std::array<std::string_view, 5> kFimPadSpellings = {"<|fim_pad|>", "<fim-pad>",
                                                              "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::array<std::string_view, 5> kFimRepSpellings = {"<|fim_repo|>", "<|repo_name|>",
                                                              "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::array<std::string_view, 1> kFimSepSpellings = {"<|file_sep|>"};
// Every token spelled like this ends generation.
constexpr std::array<std::string_view, 22> kEogSpellings = {"<|eot_id|>",
                                                            "<|im_end|>",
                                                            "<|end|>",
                                                            "<|return|>",
                                                            "<|call|>",
                                                            "<|flush|>",
                                                            "<|calls|>",
                                                            "<end_of_turn>",
                                                            "<|endoftext|>",
                                                            "</s>",
                                                            "<|eom_id|>",
                                                            "<EOT>",
                                                            "_<EOT>",
                                                            "[EOT]",
                                                            "[EOS]",
                                                            "<|end_of_text|>",
                                                            "<end_of_utterance>",
                                                            "<eos>",
                                                            "<turn|>",
                                                            "<|tool_response>",
                                                            "<｜end▁of▁sentence｜>",
                                                            "[e~["};

template <size_t N>
int32_t find_first(const Vocab& v, const std::array<std::string_view, N>& spellings) {
  for (std::string_view s : spellings) {
    if (int32_t id = v.find(s); id >= 0) return id;
  }
  return -1;
}

void make_control(Vocab& v, int32_t id) {
  if (id < 0 || (v.attr[id] & kAttrControl)) return;
  log::get("tokenizer")
      ->warn("control-looking token {} '{}' was not control-type; treating it as control", id,
             v.text[id]);
  v.attr[id] |= kAttrControl;
}

void detect_special_tokens(Vocab& v) {
  if (v.eot < 0) v.eot = find_first(v, kEotSpellings);
  make_control(v, v.eot);
  if (v.eom < 0) v.eom = v.find("<|eom_id|>");
  make_control(v, v.eom);

  std::vector<int32_t> eog;
  for (int32_t id : {find_first(v, kFimPadSpellings), find_first(v, kFimRepSpellings),
                     find_first(v, kFimSepSpellings)}) {
    make_control(v, id);
    eog.push_back(id);
  }
  for (std::string_view s : kEogSpellings) {
    const int32_t id = v.find(s);
    make_control(v, id);
    eog.push_back(id);
  }
  // gpt-oss: these structure tokens are always rendered.
  for (std::string_view s : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (int32_t id = v.find(s); id >= 0) v.attr[id] = kAttrUserDefined;
  }
  eog.push_back(v.eos);
  eog.push_back(v.eot);
  eog.push_back(v.eom);

  v.eog.assign(v.text.size(), false);
  for (int32_t id : eog) {
    if (v.valid(id)) v.eog[id] = true;
  }
  // o200k_harmony / solar-open: "<|end|>" closes a message, not the generation.
  const auto eog_has = [&](std::string_view s) {
    const int32_t id = v.find(s);
    return id >= 0 && v.eog[id];
  };
  const int32_t end_id = v.find("<|end|>");
  if (end_id >= 0 && v.eog[end_id] &&
      ((eog_has("<|return|>") && eog_has("<|call|>")) ||
       (eog_has("<|calls|>") && eog_has("<|flush|>")))) {
    v.eog[end_id] = false;
    v.attr[end_id] = kAttrUserDefined;
  }
  // gemma4: "</s>" is an ordinary token when "<|tool_response>" exists.
  const int32_t s_id = v.find("</s>");
  if (s_id >= 0 && v.eog[s_id] && eog_has("<|tool_response>")) {
    v.eog[s_id] = false;
    v.attr[s_id] = kAttrNormal;
  }
}

std::string render_piece(const Vocab& v, int32_t id) {
  const std::string& text = v.text[id];
  const uint16_t a = v.attr[id];
  if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) return text;
  if (a & kAttrNormal) {
    if (v.type == Vocab::Type::kBpe) return bpe_decode_text(text);
    std::string out;  // SentencePiece: U+2581 stands for a space
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
        out.push_back(' ');
        i += 3;
      } else {
        out.push_back(text[i++]);
      }
    }
    return out;
  }
  if ((a & kAttrByte) && text.size() >= 6) {  // "<0xXX>"
    const std::string hex = text.substr(3, 2);
    return std::string(1, static_cast<char>(std::strtol(hex.c_str(), nullptr, 16)));
  }
  return {};
}

void set_id(int32_t& slot, const std::optional<int32_t>& given, const Vocab& v,
            std::string_view what) {
  if (!given) return;
  if (v.valid(*given)) {
    slot = *given;
  } else {
    log::get("tokenizer")
        ->warn("tokenizer.ggml.{}_token_id = {} is out of range (vocabulary of {}); ignoring it",
               what, *given, v.n_tokens());
  }
}

void load_tokens(Vocab& v, const VocabSpec& spec, const std::string& where) {
  const size_t n = spec.tokens.size();
  if (n == 0) throw FormatError(where + "tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) throw FormatError(where + "too many tokens");
  if (!spec.scores.empty() && spec.scores.size() < n) {
    throw FormatError(where + "tokenizer.ggml.scores has " + std::to_string(spec.scores.size()) +
                      " entries for " + std::to_string(n) + " tokens");
  }
  if (!spec.token_types.empty() && spec.token_types.size() < n) {
    throw FormatError(where + "tokenizer.ggml.token_type has " +
                      std::to_string(spec.token_types.size()) + " entries for " +
                      std::to_string(n) + " tokens");
  }
  v.text.resize(n);
  v.score.resize(n);
  v.attr.resize(n);
  v.text_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string word =
        spec.tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : spec.tokens[i];
    const auto [it, inserted] = v.text_to_id.emplace(word, static_cast<int32_t>(i));
    if (!inserted) {
      throw FormatError(where + "duplicate token '" + word + "' (ids " +
                        std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
    v.text[i] = std::move(word);
    v.score[i] = spec.scores.empty() ? 0.0f : spec.scores[i];
    v.attr[i] = spec.token_types.empty() ? static_cast<uint16_t>(kAttrNormal)
                                         : attr_from_type(spec.token_types[i]);
  }
}

void load_merges(Vocab& v, const VocabSpec& spec) {
  v.merge_rank.reserve(spec.merges.size());
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    const std::string& m = spec.merges[i];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) continue;             // malformed: can never match a pair
    v.merge_rank.emplace(m, static_cast<int32_t>(i));  // first rank of a repeated merge wins
  }
}

}  // namespace

std::shared_ptr<const Vocab> build_vocab(const VocabSpec& spec, std::string_view source) {
  const std::string where = std::string(source) + ": ";
  auto v = std::make_shared<Vocab>();
  v->model = spec.model;
  if (spec.model == "gpt2") {
    v->type = Vocab::Type::kBpe;
    if (spec.pre.empty()) {
      log::get("tokenizer")
          ->warn("{}no tokenizer.ggml.pre; using the 'default' pre-tokenizer (quality may suffer)",
                 where);
      v->pre_name = "default";
    } else {
      v->pre_name = spec.pre;
    }
    const auto pre = pre_tokenizer_by_name(v->pre_name);
    if (!pre)
      throw FormatError(where + "unsupported pre-tokenizer tokenizer.ggml.pre = '" + v->pre_name +
                        "'");
    v->pre = *pre;
    v->add_bos = pre->add_bos;
    v->bos = 11;  // llama.cpp's defaults for gpt2 vocabularies, normally overridden below
    v->eos = 11;
  } else if (spec.model == "llama") {
    v->type = Vocab::Type::kSpm;
    v->pre.clean_spaces = false;
    v->add_space_prefix = true;
    v->add_bos = true;
    v->bos = 1;
    v->eos = 2;
    v->unk = 0;
  } else if (spec.model == "bert") {
    // llama.cpp's WPM defaults (BERT's own ids), normally overridden below.
    v->type = Vocab::Type::kWpm;
    v->pre.clean_spaces = true;
    v->add_bos = true;
    v->bos = 101;
    v->unk = 100;
    v->sep = 102;
    v->pad = 0;
    // BertNormalizer: lowercase off unless the file says so; accents are
    // stripped when lowercasing unless the file says otherwise.
    v->lowercase = spec.lowercase.value_or(false);
    v->strip_accents = spec.strip_accents.value_or(v->lowercase);
  } else if (spec.model == "t5") {
    // llama.cpp's UGM defaults (T5's ids), normally overridden below.
    v->type = Vocab::Type::kUgm;
    v->pre.clean_spaces = false;
    v->add_bos = false;
    v->add_eos = true;
    v->eos = 1;
    v->unk = 2;
    v->pad = 0;
    v->remove_extra_whitespaces = spec.remove_extra_whitespaces.value_or(false);
    if (!spec.precompiled_charsmap.empty())
      v->charsmap =
          Charsmap::parse(spec.precompiled_charsmap, where + "tokenizer.ggml.precompiled_charsmap");
  } else if (spec.model.empty()) {
    throw FormatError(where + "no tokenizer (tokenizer.ggml.model is missing)");
  } else {
    throw FormatError(where + "unsupported tokenizer model tokenizer.ggml.model = '" + spec.model +
                      "' (tern supports 'gpt2', 'llama', 'bert' and 't5')");
  }
  if (spec.add_space_prefix) v->add_space_prefix = *spec.add_space_prefix;

  load_tokens(*v, spec, where);
  if (v->type == Vocab::Type::kBpe) load_merges(*v, spec);

  for (int32_t* id : {&v->bos, &v->eos, &v->unk, &v->sep, &v->pad}) {
    if (!v->valid(*id)) *id = -1;
  }
  set_id(v->sep, spec.sep, *v, "seperator");
  set_id(v->bos, spec.bos, *v, "bos");
  set_id(v->eos, spec.eos, *v, "eos");
  set_id(v->eot, spec.eot, *v, "eot");
  set_id(v->eom, spec.eom, *v, "eom");
  set_id(v->unk, spec.unk, *v, "unknown");
  set_id(v->pad, spec.pad, *v, "padding");
  if (spec.add_bos) v->add_bos = *spec.add_bos;
  if (spec.add_eos) v->add_eos = *spec.add_eos;
  if (v->add_bos && v->bos < 0)
    throw FormatError(where + "add_bos_token is true but there is no BOS token");
  if (v->add_eos && v->eos < 0)
    throw FormatError(where + "add_eos_token is true but there is no EOS token");
  if (v->type == Vocab::Type::kWpm && (v->bos < 0 || v->sep < 0))
    throw FormatError(where + "a WordPiece vocabulary needs its BOS ([CLS]) and separator ([SEP])");
  for (const std::string& t : v->text) v->max_token_len = std::max(v->max_token_len, int(t.size()));

  detect_special_tokens(*v);
  if (v->type == Vocab::Type::kUgm) ugm_prepare(*v);

  for (int32_t id = 0; id < v->n_tokens(); ++id) {
    if (v->attr[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      v->special_tokens.push_back(id);
  }
  std::stable_sort(v->special_tokens.begin(), v->special_tokens.end(),
                   [&](int32_t a, int32_t b) { return v->text[a].size() > v->text[b].size(); });

  v->piece.resize(v->text.size());
  for (int32_t id = 0; id < v->n_tokens(); ++id) v->piece[id] = render_piece(*v, id);
  return v;
}

}  // namespace detail

namespace {

std::optional<int32_t> read_id(const gguf::GgufFile& f, const std::string& key) {
  if (!f.has(key)) return std::nullopt;
  const int64_t id = f.get_int(key);
  if (id < INT32_MIN || id > INT32_MAX) return -1;
  return static_cast<int32_t>(id);
}

std::optional<bool> read_bool(const gguf::GgufFile& f, const std::string& key) {
  if (!f.has(key)) return std::nullopt;
  return f.get_bool(key);
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& f) {
  const std::string k = "tokenizer.ggml.";
  VocabSpec spec;
  spec.model = f.get_string_or(k + "model", "");
  if (spec.model.empty())
    throw FormatError(f.path() + ": no tokenizer (tokenizer.ggml.model is missing)");
  spec.pre = f.get_string_or(k + "pre", "");
  if (!f.has(k + "tokens"))
    throw FormatError(f.path() + ": no vocabulary (tokenizer.ggml.tokens is missing)");
  spec.tokens = f.get_string_array(k + "tokens");
  if (f.has(k + "scores")) {
    const gguf::ValueType elem = f.value(k + "scores").elem_type;
    if (elem == gguf::ValueType::F32 || elem == gguf::ValueType::F64) {
      spec.scores = f.get_f32_array(k + "scores");
    } else {
      for (int32_t s : f.get_i32_array(k + "scores")) spec.scores.push_back(static_cast<float>(s));
    }
  }
  if (f.has(k + "token_type")) spec.token_types = f.get_i32_array(k + "token_type");
  if (spec.model == "gpt2") {
    if (!f.has(k + "merges"))
      throw FormatError(f.path() + ": BPE vocabulary without tokenizer.ggml.merges");
    spec.merges = f.get_string_array(k + "merges");
  }
  spec.bos = read_id(f, k + "bos_token_id");
  spec.eos = read_id(f, k + "eos_token_id");
  spec.eot = read_id(f, k + "eot_token_id");
  spec.eom = read_id(f, k + "eom_token_id");
  spec.unk = read_id(f, k + "unknown_token_id");
  spec.pad = read_id(f, k + "padding_token_id");
  spec.add_bos = read_bool(f, k + "add_bos_token");
  spec.add_eos = read_bool(f, k + "add_eos_token");
  spec.add_space_prefix = read_bool(f, k + "add_space_prefix");
  spec.sep = read_id(f, k + "seperator_token_id");
  spec.lowercase = read_bool(f, k + "normalizer.lowercase");
  spec.remove_extra_whitespaces = read_bool(f, k + "remove_extra_whitespaces");
  if (spec.model == "t5" && f.has(k + "precompiled_charsmap")) {
    const gguf::MetaValue& m = f.value(k + "precompiled_charsmap");
    if (m.type != gguf::ValueType::ARRAY ||
        (m.elem_type != gguf::ValueType::U8 && m.elem_type != gguf::ValueType::I8))
      throw FormatError(f.path() +
                        ": tokenizer.ggml.precompiled_charsmap is not an array of bytes");
    spec.precompiled_charsmap.assign(reinterpret_cast<const char*>(m.payload.data()),
                                     m.payload.size());
  }
  spec.strip_accents = read_bool(f, k + "normalizer.strip_accents");
  return from_spec(spec, f.path());
}

Tokenizer Tokenizer::from_spec(const VocabSpec& spec, std::string_view source) {
  return Tokenizer(detail::build_vocab(spec, source));
}

}  // namespace tern
