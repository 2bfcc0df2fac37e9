#pragma once
// Pre-tokenizers for byte-level BPE vocabularies: split text into words before
// BPE merges run inside each word. Each kind reproduces, by hand-written
// scanners (no std::regex), the regex chain llama.cpp uses for the
// `tokenizer.ggml.pre` names mapped to it:
//
//   kDefault  "default" or missing:  [\p{P}$+<=>^~|]+ , then GPT-2, then \p{N}+ , then [0-9]{3}
//   kGpt2     "gpt-2", "gpt2", "phi-2", "mpt", "olmo", ...:
//             's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   kSmolLM   "smollm", "starcoder", "refact", "command-r", ...: every \p{N} alone, then GPT-2
//   kLlama3   "llama3", "llama-bpe", "llama-v3", "dbrx", ...:
//             (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//             | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen2    "qwen2", "stablelm2", "megrez", ...: as kLlama3 with \p{N} (one digit)
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern {

enum class PreTokenizerKind { kDefault, kGpt2, kSmolLM, kLlama3, kQwen2 };

// What a `tokenizer.ggml.pre` name implies (llama.cpp's table).
struct PreTokenizerConfig {
  PreTokenizerKind kind = PreTokenizerKind::kDefault;
  bool clean_spaces = true;    // detokenize removes " ." " ," " 's" ... (llama.cpp clean_spaces)
  bool ignore_merges = false;  // a word that is already a token skips BPE merges
  bool add_bos = false;  // default for add_bos before tokenizer.ggml.add_bos_token overrides it
};

// Looks up a `tokenizer.ggml.pre` name; nullopt when tern does not know it.
std::optional<PreTokenizerConfig> pre_tokenizer_by_name(std::string_view name);

std::string_view pre_tokenizer_name(PreTokenizerKind kind);

// Splits text into words. Invalid UTF-8 bytes become U+FFFD (as in llama.cpp);
// the words are UTF-8 and their concatenation is the (repaired) input.
std::vector<std::string> pre_tokenize(PreTokenizerKind kind, std::string_view text);

}  // namespace tern
