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
      return DTypeTraits{"Q2_K", 256, 84, false};
    case DType::Q3_K:
      return DTypeTraits{"Q3_K", 256, 110, false};
    case DType::Q4_K:
      return DTypeTraits{"Q4_K", 256, 144, true};
    case DType::Q5_K:
      return DTypeTraits{"Q5_K", 256, 176, true};
    case DType::Q6_K:
      return DTypeTraits{"Q6_K", 256, 210, true};
    case DType::Q8_K:
      return DTypeTraits{"Q8_K", 256, 292, false};
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

}  // namespace tern
