#pragma once
// Helpers for the gguf tests: a byte builder for hand-made (often broken)
// GGUF files, a small valid file with every kind of content, and a function
// that reads every value and tensor of a parsed file.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "tern/core/error.h"
#include "tern/gguf/gguf.h"
#include "tern/kernels/dequant.h"

namespace tern::gguf::test {

// Appends little-endian fields; for writing GGUF files byte by byte.
struct Bytes {
  std::vector<uint8_t> b;

  template <typename T>
  Bytes& put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  // magic, version, n_tensors, n_kv
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(0x46554747).u32(version).u64(n_tensors).u64(n_kv);
  }
  // A key with a u32 value.
  Bytes& kv_u32(std::string_view key, uint32_t v) {
    return str(key).u32(uint32_t(ValueType::U32)).u32(v);
  }
  // A tensor info entry.
  Bytes& tensor(std::string_view name, const std::vector<uint64_t>& dims, DType type,
                uint64_t offset) {
    str(name).u32(uint32_t(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(uint32_t(type)).u64(offset);
  }
  Bytes& pad_to(size_t a) {
    b.resize((b.size() + a - 1) / a * a, 0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

// A small valid file: metadata of every type, three tensors of different
// types, and no trailing padding (the last tensor is 32 bytes), so that
// every proper prefix of it is invalid.
inline std::vector<uint8_t> small_valid_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_i32("i32", -7);
  w.set_u8("u8", 200);
  w.set_i8("i8", -3);
  w.set_u16("u16", 65535);
  w.set_i16("i16", -300);
  w.set_u64("u64", 1ull << 40);
  w.set_i64("i64", -(1ll << 40));
  w.set_f32("f32", 0.5f);
  w.set_f64("f64", 0.25);
  w.set_bool("bool", true);
  w.set_string_array("tokens", {"a", "", "<s>"});
  w.set_i32_array("types", {1, 2, 3});
  w.set_f32_array("scores", {0.5f, -1.0f});
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(float(i));
  w.add_tensor("q8", DType::Q8_0, {32, 2}, kernels::quantize_ref(DType::Q8_0, v));
  w.add_tensor("q4", DType::Q4_1, {64}, kernels::quantize_ref(DType::Q4_1, v));
  w.add_tensor_f32("f32", {8}, std::span<const float>(v.data(), 8));
  return w.to_bytes();
}

// Reads every metadata value through the typed getters and dequantizes the
// first and last row of every tensor. Returns a sum so nothing is optimised
// away. Getters may throw FormatError for values that do not fit; that is fine.
inline double touch_all(const GgufFile& f) {
  double sum = 0;
  for (const std::string& k : f.keys()) {
    try {
      const MetaValue& v = f.value(k);
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
        case ValueType::ARRAY:
          sum += double(f.array_length(k));
          if (v.elem_type == ValueType::STRING) {
            for (const auto& s : f.get_string_array(k)) sum += double(s.size());
          } else if (v.elem_type == ValueType::F32 || v.elem_type == ValueType::F64) {
            for (float x : f.get_f32_array(k)) sum += double(x);
          } else if (v.elem_type != ValueType::ARRAY && v.elem_type != ValueType::BOOL) {
            for (int32_t x : f.get_i32_array(k)) sum += x;
          }
          break;
        default:
          sum += double(f.get_int(k));
          break;
      }
    } catch (const FormatError&) {
      sum += 1;
    }
  }
  for (const TensorInfo& t : f.tensors()) {
    sum += double(t.nbytes);
    if (!kernels::can_dequantize(t.type)) continue;
    std::vector<float> row(size_t(t.dims[0]));
    kernels::dequantize_row(t.type, t.data, row.data(), t.dims[0]);
    kernels::dequantize_row(t.type, t.data + t.nbytes - t.row_bytes(), row.data(), t.dims[0]);
    for (float x : row) sum += std::isfinite(x) ? double(x) : 0.0;
  }
  return sum;
}

}  // namespace tern::gguf::test
