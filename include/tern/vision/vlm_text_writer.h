#pragma once
// The text side of a SmolVLM-shaped pair, made from a real SmolLM2 GGUF
// (SmolVLM-256M's text backbone has exactly SmolLM2-135M's shapes): the same
// weights with SmolVLM's 128 added special tokens appended to the vocabulary
// (control tokens, so the idefics3 wrapping <fake_token_around_image>
// <row_i_col_j> ... <global-img> tokenizes as llama.cpp's mtmd expects),
// each with an embedding row copied from an existing token (the table's own
// type and scale; nothing is trained on them, they only need to be plausible
// inputs). A tied output head grows with the table. Everything else is
// copied byte for byte. For `tern gen-vlm-text` and the oracle tests; the
// same for the audio projectors' wrapping tokens.
#include <string>
#include <vector>

namespace tern::vision {

// SmolVLM's added tokens: the image wrapping, the utterance end, the 6 x 6
// grid's row/column markers, then reserved fillers up to 128.
std::vector<std::string> smolvlm_added_tokens();

// The special texts llama.cpp's mtmd wraps a clip in for the audio
// projectors that wrap one (qwen2a: <|audio_bos|> ... <|audio_eos|>,
// voxtral: [BEGIN_AUDIO] ...): added to SmolLM2 they make a text model those
// projectors pair with (`tern gen-vlm-text --tokens audio`).
std::vector<std::string> audio_wrap_tokens();

// Writes `out`: `from` with `added` appended as control tokens (as above:
// embedding rows copied from existing tokens, a tied or untied head grown
// with them, `label` appended to general.name); returns the new vocabulary
// size. Throws FormatError / IoError for an unreadable source,
// InvalidArgument if it has one of the tokens.
int write_text_with_tokens(const std::string& from, const std::string& out,
                           const std::vector<std::string>& added, const std::string& label);
// write_text_with_tokens with smolvlm_added_tokens().
int write_smolvlm_text(const std::string& from, const std::string& out);

}  // namespace tern::vision
