#include "tern/core/dtype.h"

#include <cassert>

namespace tern {

std::optional<DTypeTraits> dtype_traits(uint32_t raw) {
  switch (static_cast<DType>(raw)) {
    case DType::F32:
      return DTypeTraits{"F32", 1, 4, true};
    case DType::F16:
      return DTypeTraits{"F16", 1, 2, true};
    case DType::BF16:
      return DTypeTraits{"BF16", 1, 2, true};
    case DType::Q4_0:
      return DTypeTraits{"Q4_0", 32, 18, true};
    case DType::Q4_1:
      return DTypeTraits{"Q4_1", 32, 20, true};
    case DType::Q5_0:
      return DTypeTraits{"Q5_0", 32, 22, true};
    case DType::Q5_1:
      return DTypeTraits{"Q5_1", 32, 24, true};
    case DType::Q8_0:
      return DTypeTraits{"Q8_0", 32, 34, true};
    case DType::Q8_1:
      return DTypeTraits{"Q8_1", 32, 36, false};
    case DType::Q2_K:
      return DTypeTraits{"Q2_K", 256, 84, true};
    case DType::Q3_K:
      return DTypeTraits{"Q3_K", 256, 110, true};
    case DType::Q4_K:
      return DTypeTraits{"Q4_K", 256, 144, true};
    case DType::Q5_K:
      return DTypeTraits{"Q5_K", 256, 176, true};
    case DType::Q6_K:
      return DTypeTraits{"Q6_K", 256, 210, true};
    case DType::Q8_K:
      return DTypeTraits{"Q8_K", 256, 292, false};
    // i-quants (block sizes from ggml-common.h's block_iq* structs).
    case DType::IQ2_XXS:
      return DTypeTraits{"IQ2_XXS", 256, 66, true};
    case DType::IQ2_XS:
      return DTypeTraits{"IQ2_XS", 256, 74, true};
    case DType::IQ3_XXS:
      return DTypeTraits{"IQ3_XXS", 256, 98, true};
    case DType::IQ1_S:
      return DTypeTraits{"IQ1_S", 256, 50, true};
    case DType::IQ4_NL:
      return DTypeTraits{"IQ4_NL", 32, 18, true};
    case DType::IQ3_S:
      return DTypeTraits{"IQ3_S", 256, 110, true};
    case DType::IQ2_S:
      return DTypeTraits{"IQ2_S", 256, 82, true};
    case DType::IQ4_XS:
      return DTypeTraits{"IQ4_XS", 256, 136, true};
    case DType::IQ1_M:
      return DTypeTraits{"IQ1_M", 256, 56, true};
    // Ternary, fp4 and the small-block 1/2-bit types.
    case DType::TQ1_0:
      return DTypeTraits{"TQ1_0", 256, 54, true};
    case DType::TQ2_0:
      return DTypeTraits{"TQ2_0", 256, 66, true};
    case DType::MXFP4:
      return DTypeTraits{"MXFP4", 32, 17, true};
    case DType::NVFP4:
      return DTypeTraits{"NVFP4", 64, 36, true};
    case DType::Q1_0:
      return DTypeTraits{"Q1_0", 128, 18, true};
    case DType::Q2_0:
      return DTypeTraits{"Q2_0", 64, 18, true};
    case DType::I8:
      return DTypeTraits{"I8", 1, 1, false};
    case DType::I16:
      return DTypeTraits{"I16", 1, 2, false};
    case DType::I32:
      return DTypeTraits{"I32", 1, 4, false};
    case DType::I64:
      return DTypeTraits{"I64", 1, 8, false};
    case DType::F64:
      return DTypeTraits{"F64", 1, 8, false};
  }
  return std::nullopt;
}

DTypeTraits dtype_traits(DType t) {
  auto tr = dtype_traits(static_cast<uint32_t>(t));
  assert(tr && "unknown dtype");
  return *tr;
}

std::string_view dtype_name(DType t) {
  return dtype_traits(t).name;
}

std::string dtype_label(DType t) {
  const auto tr = dtype_traits(static_cast<uint32_t>(t));
  const std::string num = "type " + std::to_string(static_cast<uint32_t>(t));
  return tr ? std::string(tr->name) + " (" + num + ")" : num;
}

std::string_view removed_dtype_name(uint32_t raw) {
  switch (raw) {
    case 4:
      return "Q4_2";
    case 5:
      return "Q4_3";
    case 31:
      return "Q4_0_4_4";
    case 32:
      return "Q4_0_4_8";
    case 33:
      return "Q4_0_8_8";
    case 36:
      return "IQ4_NL_4_4";
    case 37:
      return "IQ4_NL_4_8";
    case 38:
      return "IQ4_NL_8_8";
    default:
      return "";
  }
}

}  // namespace tern
