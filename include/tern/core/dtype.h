#pragma once
// Tensor element types as numbered by the GGUF/ggml format (llama.cpp b11434's
// ggml_type, every id it still writes). Shared by the GGUF reader (which
// validates them: any known type parses and its tensor sizes are checked) and
// the reference dequantizers (which say which of them tern can load).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tern {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  // 31..33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) and 36..38 (IQ4_NL_4_4, _4_8,
  // _8_8) were runtime repacks that llama.cpp no longer reads from GGUF
  // files: tern treats them as unknown (removed_dtype_name names them).
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};

struct DTypeTraits {
  std::string_view name;
  uint32_t block_elems;  // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
  bool dequantizable;    // tern has a reference dequantizer for it
};

// Traits for a known type, or nullopt for a number tern does not know.
std::optional<DTypeTraits> dtype_traits(uint32_t raw);
DTypeTraits dtype_traits(DType t);  // t must be a known type
std::string_view dtype_name(DType t);
// "IQ3_XXS (type 18)": the name users see in llama.cpp's tools, and the number.
std::string dtype_label(DType t);
// The name of an id llama.cpp once used and no longer accepts in GGUF files
// (4, 5, 31..33, 36..38), or "" for any other id.
std::string_view removed_dtype_name(uint32_t raw);

// Bytes needed for n elements of type t (n must be a multiple of the block).
inline size_t dtype_row_bytes(DType t, size_t n) {
  const DTypeTraits tr = dtype_traits(t);
  return n / tr.block_elems * tr.block_bytes;
}

}  // namespace tern
