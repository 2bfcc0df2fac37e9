// GgufWriter: encodes metadata as it is set and lays the file out on
// to_bytes() (layout in include/tern/gguf/gguf_file.h).
#include "tern/gguf/gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "tern/core/error.h"

namespace tern::gguf {
namespace {

constexpr size_t kDefaultAlignment = 32;

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

template <typename T>
std::vector<uint8_t> scalar(ValueType t, T v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, uint32_t(t));
  put<T>(out, v);
  return out;
}

// The GGUF value type for a C++ scalar type.
template <typename T>
constexpr ValueType value_type_of() {
  if constexpr (std::is_same_v<T, bool>)
    return ValueType::BOOL;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return ValueType::U8;
  else if constexpr (std::is_same_v<T, int8_t>)
    return ValueType::I8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return ValueType::U16;
  else if constexpr (std::is_same_v<T, int16_t>)
    return ValueType::I16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return ValueType::U32;
  else if constexpr (std::is_same_v<T, int32_t>)
    return ValueType::I32;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return ValueType::U64;
  else if constexpr (std::is_same_v<T, int64_t>)
    return ValueType::I64;
  else if constexpr (std::is_same_v<T, float>)
    return ValueType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return ValueType::F64;
  else
    static_assert(sizeof(T) == 0, "not a GGUF scalar type");
}

size_t align_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

}  // namespace

void GgufWriter::set_encoded(std::string key, std::vector<uint8_t> encoded) {
  if (key.empty()) throw InvalidArgument("GgufWriter: empty metadata key");
  for (Kv& kv : kvs_) {
    if (kv.key == key) {
      kv.encoded = std::move(encoded);
      return;
    }
  }
  kvs_.push_back({std::move(key), std::move(encoded)});
}

void GgufWriter::set_u8(std::string key, uint8_t v) {
  set_encoded(std::move(key), scalar(ValueType::U8, v));
}
void GgufWriter::set_i8(std::string key, int8_t v) {
  set_encoded(std::move(key), scalar(ValueType::I8, v));
}
void GgufWriter::set_u16(std::string key, uint16_t v) {
  set_encoded(std::move(key), scalar(ValueType::U16, v));
}
void GgufWriter::set_i16(std::string key, int16_t v) {
  set_encoded(std::move(key), scalar(ValueType::I16, v));
}
void GgufWriter::set_u32(std::string key, uint32_t v) {
  set_encoded(std::move(key), scalar(ValueType::U32, v));
}
void GgufWriter::set_i32(std::string key, int32_t v) {
  set_encoded(std::move(key), scalar(ValueType::I32, v));
}
void GgufWriter::set_u64(std::string key, uint64_t v) {
  set_encoded(std::move(key), scalar(ValueType::U64, v));
}
void GgufWriter::set_i64(std::string key, int64_t v) {
  set_encoded(std::move(key), scalar(ValueType::I64, v));
}
void GgufWriter::set_f32(std::string key, float v) {
  set_encoded(std::move(key), scalar(ValueType::F32, v));
}
void GgufWriter::set_f64(std::string key, double v) {
  set_encoded(std::move(key), scalar(ValueType::F64, v));
}
void GgufWriter::set_bool(std::string key, bool v) {
  set_encoded(std::move(key), scalar(ValueType::BOOL, uint8_t(v ? 1 : 0)));
}
void GgufWriter::set_string(std::string key, std::string v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, uint32_t(ValueType::STRING));
  put_string(out, v);
  set_encoded(std::move(key), std::move(out));
}

void GgufWriter::set_array_raw(std::string key, ValueType elem, uint64_t count, const void* data,
                               size_t elem_size) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, uint32_t(ValueType::ARRAY));
  put<uint32_t>(out, uint32_t(elem));
  put<uint64_t>(out, count);
  const auto* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + count * elem_size);
  set_encoded(std::move(key), std::move(out));
}

template <typename T>
void GgufWriter::set_array(std::string key, const std::vector<T>& v) {
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> is packed: spell it out
    std::vector<uint8_t> bytes(v.begin(), v.end());
    set_array_raw(std::move(key), ValueType::BOOL, bytes.size(), bytes.data(), 1);
  } else {
    set_array_raw(std::move(key), value_type_of<T>(), v.size(), v.data(), sizeof(T));
  }
}
template void GgufWriter::set_array(std::string, const std::vector<uint8_t>&);
template void GgufWriter::set_array(std::string, const std::vector<int8_t>&);
template void GgufWriter::set_array(std::string, const std::vector<uint16_t>&);
template void GgufWriter::set_array(std::string, const std::vector<int16_t>&);
template void GgufWriter::set_array(std::string, const std::vector<uint32_t>&);
template void GgufWriter::set_array(std::string, const std::vector<int32_t>&);
template void GgufWriter::set_array(std::string, const std::vector<uint64_t>&);
template void GgufWriter::set_array(std::string, const std::vector<int64_t>&);
template void GgufWriter::set_array(std::string, const std::vector<float>&);
template void GgufWriter::set_array(std::string, const std::vector<double>&);
template void GgufWriter::set_array(std::string, const std::vector<bool>&);

void GgufWriter::set_string_array(std::string key, const std::vector<std::string>& v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, uint32_t(ValueType::ARRAY));
  put<uint32_t>(out, uint32_t(ValueType::STRING));
  put<uint64_t>(out, v.size());
  for (const std::string& s : v) put_string(out, s);
  set_encoded(std::move(key), std::move(out));
}
void GgufWriter::set_i32_array(std::string key, const std::vector<int32_t>& v) {
  set_array(std::move(key), v);
}
void GgufWriter::set_f32_array(std::string key, const std::vector<float>& v) {
  set_array(std::move(key), v);
}

void GgufWriter::set_value(std::string key, const MetaValue& v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, uint32_t(v.type));
  switch (v.type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      put<uint8_t>(out, uint8_t(v.bits));
      break;
    case ValueType::U16:
    case ValueType::I16:
      put<uint16_t>(out, uint16_t(v.bits));
      break;
    case ValueType::U32:
    case ValueType::I32:
      put<uint32_t>(out, uint32_t(v.bits));
      break;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:  // F64's bits are the double's
      put<uint64_t>(out, v.bits);
      break;
    case ValueType::F32:  // held as a double, which holds every float exactly
      put<float>(out, float(std::bit_cast<double>(v.bits)));
      break;
    case ValueType::STRING:
      put_string(out, v.str);
      break;
    case ValueType::ARRAY:
      put<uint32_t>(out, uint32_t(v.elem_type));
      put<uint64_t>(out, v.count);
      out.insert(out.end(), v.payload.begin(), v.payload.end());
      break;
    default:
      throw InvalidArgument("GgufWriter: metadata '" + key + "' has an unknown value type");
  }
  set_encoded(std::move(key), std::move(out));
}

void GgufWriter::add_tensor(std::string name, DType type, std::vector<int64_t> dims,
                            std::vector<uint8_t> data) {
  const std::string tn = "GgufWriter: tensor '" + name + "'";
  for (const Tensor& t : tensors_) {
    if (t.name == name) throw InvalidArgument(tn + " added twice");
  }
  if (name.size() > 64) throw InvalidArgument(tn + " has a name longer than 64 bytes");
  if (dims.empty() || dims.size() > 4) throw InvalidArgument(tn + " must have 1 to 4 dimensions");
  const auto traits = dtype_traits(uint32_t(type));
  if (!traits) throw InvalidArgument(tn + " has an unknown type");
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d <= 0 || __builtin_mul_overflow(n, d, &n))
      throw InvalidArgument(tn + " has invalid dimensions");
  }
  if (dims[0] % traits->block_elems != 0) {
    throw InvalidArgument(tn + ": row length is not a multiple of the block size");
  }
  const size_t nbytes = size_t(n / traits->block_elems) * traits->block_bytes;
  if (data.size() != nbytes) {
    throw InvalidArgument(tn + " has " + std::to_string(data.size()) + " bytes of data, expected " +
                          std::to_string(nbytes));
  }
  tensors_.push_back({std::move(name), type, std::move(dims), std::move(data)});
}

void GgufWriter::add_tensor_f32(std::string name, std::vector<int64_t> dims,
                                std::span<const float> values) {
  std::vector<uint8_t> data(values.size_bytes());
  std::memcpy(data.data(), values.data(), data.size());
  add_tensor(std::move(name), DType::F32, std::move(dims), std::move(data));
}

// general.alignment when set (with set_u32 or set_u64), else 32.
size_t GgufWriter::alignment() const {
  for (const Kv& kv : kvs_) {
    if (kv.key != "general.alignment") continue;
    uint32_t type;
    std::memcpy(&type, kv.encoded.data(), 4);
    uint64_t v = 0;
    if (type == uint32_t(ValueType::U32)) {
      std::memcpy(&v, kv.encoded.data() + 4, 4);  // little-endian: low half of v
    } else if (type == uint32_t(ValueType::U64)) {
      std::memcpy(&v, kv.encoded.data() + 4, 8);
    } else {
      throw InvalidArgument("GgufWriter: general.alignment must be set with set_u32");
    }
    if (v == 0 || v > (1u << 30) || !std::has_single_bit(v)) {
      throw InvalidArgument("GgufWriter: general.alignment must be a power of two up to 2^30");
    }
    return size_t(v);
  }
  return kDefaultAlignment;
}

// Everything before the tensor data: header, metadata, tensor infos, padding.
std::vector<uint8_t> GgufWriter::head_bytes() const {
  const size_t align = alignment();
  std::vector<uint8_t> out;
  put<uint32_t>(out, 0x46554747);  // "GGUF"
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kvs_.size());
  for (const Kv& kv : kvs_) {
    put_string(out, kv.key);
    out.insert(out.end(), kv.encoded.begin(), kv.encoded.end());
  }
  uint64_t offset = 0;  // relative to the data section
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, uint32_t(t.dims.size()));
    for (int64_t d : t.dims) put<uint64_t>(out, uint64_t(d));
    put<uint32_t>(out, uint32_t(t.type));
    put<uint64_t>(out, offset);
    offset += align_up(t.data.size(), align);
  }
  out.resize(align_up(out.size(), align), 0);
  return out;
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  const size_t align = alignment();
  std::vector<uint8_t> out = head_bytes();
  for (const Tensor& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(align_up(out.size(), align),
               0);  // the data section starts aligned, so this aligns offsets
  }
  return out;
}

// Streams the same bytes as to_bytes() without building them in memory.
void GgufWriter::write(const std::string& path) const {
  const size_t align = alignment();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw IoError(path + ": cannot open for writing: " + std::strerror(errno));
  static const uint8_t kZeros[64] = {};
  bool ok = true;
  auto put_bytes = [&](const uint8_t* p, size_t n) {
    if (ok && n > 0 && std::fwrite(p, 1, n, f) != n) ok = false;
  };
  const std::vector<uint8_t> head = head_bytes();
  put_bytes(head.data(), head.size());
  for (const Tensor& t : tensors_) {
    put_bytes(t.data.data(), t.data.size());
    for (size_t pad = align_up(t.data.size(), align) - t.data.size(); pad > 0;) {
      const size_t n = std::min(pad, sizeof kZeros);
      put_bytes(kZeros, n);
      pad -= n;
    }
  }
  ok = ok && std::fflush(f) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !ok)
    throw IoError(path + ": write failed: " + std::strerror(ok ? errno : err));
}

}  // namespace tern::gguf
