#pragma once
// Private to model/: the encoder (BERT-family) cases of generate_arch_model,
// which carry their own WordPiece or unigram vocabulary (gen_encoder.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/model/gen_arch.h"

namespace tern {

bool is_encoder_case(const std::string& name);
// The embedding encoders ("bert", "nomic-bert", "xlmr"), or with rankers the
// cross-encoder rerankers ("bert-reranker", "xlmr-reranker").
std::vector<std::string> encoder_cases(bool rankers);
// A unigram ("t5") vocabulary as llama.cpp's converter writes XLM-R's, with
// its precompiled charsmap blob (gen_ugm_vocab.cpp).
struct GenUgmVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::string charsmap;
  int32_t bos, pad, eos, unk, mask;
};
GenUgmVocab make_ugm_vocab();

GenArchResult generate_encoder_model(const std::string& name, uint64_t seed, DType weight_type);

}  // namespace tern
