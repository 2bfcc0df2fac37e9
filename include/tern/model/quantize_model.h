#pragma once
// Requantizing a GGUF model (`tern quantize`): every linear weight is
// dequantized with the reference dequantizers and written in another type by
// the reference quantizers (kernels/dequant.h); metadata and every other
// tensor are copied byte for byte.
//
// Which tensors: those whose name ends in "weight" with 2 or more dimensions
// (norms and biases are 1-D), except position / token-type embeddings and
// convolution kernels. Which type each gets:
//   1. a --tensor-type REGEX=TYPE whose REGEX is found in the name (first wins);
//   2. --keep-output: output.weight (token_embd.weight when the model has no
//      output.weight, the tied LM head) is copied unchanged;
//   3. without --pure: token_embd.weight and output.weight get Q8_0 when
//      TYPE has fewer bits (the LM head is where few bits hurt most);
//   4. TYPE.
// A type whose block does not divide the row length falls back along
// fallback_type() until one does (llama-quantize's choice for the 256-block
// types: IQ4_NL, or Q5_0 / Q5_1 / Q8_0 for Q4_K / Q5_K / Q6_K).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/core/task_pool.h"
#include "tern/gguf/gguf_file.h"

namespace tern {

// The types `tern quantize` and `gen-arch-model --weights` can write.
std::vector<DType> quantize_types();
// "q4_k" or "Q4_K" -> DType::Q4_K; InvalidArgument naming the valid types.
DType parse_quantize_type(const std::string& name);
// The comma-separated names of quantize_types(), for messages and help.
std::string quantize_type_names();
// The type a tensor of type t falls back to when its rows are not whole t
// blocks (the chain ends at F16, block size 1).
DType fallback_type(DType t);

struct QuantizeOptions {
  DType type = DType::Q8_0;
  bool pure = false;
  bool keep_output = false;
  std::vector<std::pair<std::string, DType>> tensor_types;  // REGEX, TYPE
};

struct QuantizedTensor {
  std::string name;
  DType from = DType::F32;
  DType wanted = DType::F32;  // before any fallback
  DType to = DType::F32;      // as written
  bool requantized = false;   // false: copied unchanged
  size_t bytes_in = 0, bytes_out = 0;
};

// in -> out_path. Rows are split over `pool` (the bytes do not depend on
// how many threads). Writes out_path + ".part" and renames it; throws
// IoError (OUT unwritable, disk full: the partial file is removed),
// InvalidArgument (a bad --tensor-type regex). Returns one entry per tensor,
// in file order.
std::vector<QuantizedTensor> quantize_model(const gguf::GgufFile& in, const std::string& out_path,
                                            const QuantizeOptions& opts, TaskPool& pool);

}  // namespace tern
