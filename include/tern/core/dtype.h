#pragma once
// Tensor element types as numbered by the GGUF/ggml format. Shared by the
// GGUF reader (which validates them) and the reference dequantizers.
#include <cstddef>
#include <cstdint>
#include <optional>
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
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
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

// Bytes needed for n elements of type t (n must be a multiple of the block).
inline size_t dtype_row_bytes(DType t, size_t n) {
  const DTypeTraits tr = dtype_traits(t);
  return n / tr.block_elems * tr.block_bytes;
}

}  // namespace tern
