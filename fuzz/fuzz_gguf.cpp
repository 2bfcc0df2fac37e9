// libFuzzer target for the GGUF reader.
//
// How to run: configure and build with the `fuzz` preset (clang, libFuzzer,
// ASan and UBSan):
//   cmake --preset fuzz -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
//   ninja -C build-fuzz fuzz_gguf fuzz_gguf_seeds
// write a seed corpus of small valid files with `build-fuzz/fuzz/fuzz_gguf_seeds
// build-fuzz/corpus`, then fuzz for a minute with the GGUF dictionary:
//   build-fuzz/fuzz/fuzz_gguf build-fuzz/corpus -dict=fuzz/gguf.dict
//       -max_total_time=60 -max_len=4096 -rss_limit_mb=2048
// New interesting inputs are added to build-fuzz/corpus. A crash, a sanitizer
// report or a broken invariant below (__builtin_trap) leaves a crash-<sha1>
// file in the working directory; replay it with `fuzz_gguf crash-<sha1>`.
// Every input must either parse or be rejected with tern::FormatError.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tern/core/error.h"
#include "tern/gguf/gguf_file.h"
#include "tern/kernels/dequant.h"

namespace {

using tern::gguf::GgufFile;
using tern::gguf::MetaValue;
using tern::gguf::ValueType;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// Reads every metadata value through the typed getters. Getters may reject a
// value that does not fit the requested type, always with FormatError.
double touch_metadata(const GgufFile& f) {
  double sum = 0;
  for (const std::string& k : f.keys()) {
    check(f.has(k));
    const MetaValue& v = f.value(k);
    try {
      switch (v.type) {
        case ValueType::STRING:
          sum += double(f.get_string(k).size());
          break;
        case ValueType::F32:
        case ValueType::F64:
          sum += double(f.get_f32(k));
          break;
        case ValueType::BOOL:
          sum += f.get_bool(k);
          break;
        case ValueType::ARRAY: {
          check(f.array_length(k) == v.count);
          if (v.elem_type == ValueType::STRING) {
            check(f.get_string_array(k).size() == v.count);
          } else if (v.elem_type == ValueType::F32 || v.elem_type == ValueType::F64) {
            for (float x : f.get_f32_array(k)) sum += double(x);
          } else if (v.elem_type != ValueType::ARRAY && v.elem_type != ValueType::BOOL) {
            for (int32_t x : f.get_i32_array(k)) sum += x;
          }
          break;
        }
        default:
          sum += double(f.get_u32_or(k, 0)) + double(f.get_int(k));
          break;
      }
    } catch (const tern::FormatError&) {
      sum += 1;
    }
  }
  return sum;
}

// Checks each tensor's invariants and dequantizes its first and last row.
double touch_tensors(const GgufFile& f, std::span<const uint8_t> input) {
  double sum = 0;
  std::vector<float> row;
  for (const tern::gguf::TensorInfo& t : f.tensors()) {
    check(f.find_tensor(t.name) == &t);
    check(!t.dims.empty() && t.dims.size() <= 4);
    check(t.offset % f.alignment() == 0);
    check(t.nbytes == size_t(t.n_rows()) * t.row_bytes());
    check(t.data >= input.data() && t.data + t.nbytes <= input.data() + input.size());
    if (!tern::kernels::can_dequantize(t.type)) continue;
    row.resize(size_t(t.dims[0]));
    tern::kernels::dequantize_row(t.type, t.data, row.data(), t.dims[0]);
    tern::kernels::dequantize_row(t.type, t.data + t.nbytes - t.row_bytes(), row.data(), t.dims[0]);
    for (float x : row) sum += std::isfinite(x) ? double(x) : 0.0;
  }
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> input(data, size);
  try {
    const GgufFile f = GgufFile::from_memory(input, "fuzz.gguf");
    volatile double sink = touch_metadata(f) + touch_tensors(f, input);
    (void)sink;
  } catch (const tern::FormatError&) {
    // Rejected cleanly: the expected outcome for most inputs.
  }
  return 0;
}
