#pragma once
// The text side of a SmolVLM-shaped pair, made from a real SmolLM2 GGUF
// (SmolVLM-256M's text backbone has exactly SmolLM2-135M's shapes): the same
// weights with SmolVLM's 128 added special tokens appended to the vocabulary
// (control tokens, so the idefics3 wrapping <fake_token_around_image>
// <row_i_col_j> ... <global-img> tokenizes as llama.cpp's mtmd expects),
// each with an embedding row copied from an existing token (the table's own
// type and scale; nothing is trained on them, they only need to be plausible
// inputs). A tied output head grows with the table. Everything else is
// copied byte for byte. For `tern gen-vlm-text` and the oracle tests.
#include <string>
#include <vector>

namespace tern::vision {

// SmolVLM's added tokens: the image wrapping, the utterance end, the 6 x 6
// grid's row/column markers, then reserved fillers up to 128.
std::vector<std::string> smolvlm_added_tokens();

// Writes `out`; returns the new vocabulary size. Throws FormatError /
// IoError for an unreadable source, InvalidArgument if it has the tokens.
int write_smolvlm_text(const std::string& from, const std::string& out);

}  // namespace tern::vision
