// GgufFile accessors: typed metadata getters and tensor lookup. The parser
// (parser.cpp) has already validated every value, so decoding here only
// checks types and ranges, never bounds.
#include "tern/gguf/gguf_file.h"

#include <bit>
#include <cstring>
#include <limits>

#include "byte_reader.h"
#include "tern/core/error.h"

namespace tern::gguf {
namespace {

bool is_unsigned_int(ValueType t) {
  return t == ValueType::U8 || t == ValueType::U16 || t == ValueType::U32 || t == ValueType::U64;
}
bool is_signed_int(ValueType t) {
  return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64;
}
bool is_int(ValueType t) {
  return is_unsigned_int(t) || is_signed_int(t);
}

size_t int_size(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
      return 4;
    default:
      return 8;
  }
}

// Decodes one little-endian integer element of type t at p into (negative, magnitude bits).
struct IntValue {
  bool negative;
  uint64_t bits;  // the value itself when !negative; as int64 when negative
};
IntValue load_int(ValueType t, const uint8_t* p) {
  uint64_t u = 0;
  std::memcpy(&u, p, int_size(t));  // little-endian host
  if (is_signed_int(t)) {
    const int shift = 64 - 8 * int(int_size(t));
    const int64_t s = int64_t(u << shift) >> shift;  // sign-extend
    return {s < 0, uint64_t(s)};
  }
  return {false, u};
}

IntValue scalar_int(const MetaValue& v) {
  return {is_signed_int(v.type) && int64_t(v.bits) < 0, v.bits};
}

std::string int_text(IntValue v) {
  return v.negative ? std::to_string(int64_t(v.bits)) : std::to_string(v.bits);
}

std::string describe(const MetaValue& v) {
  if (v.type != ValueType::ARRAY) return std::string(value_type_name(v.type));
  return "array of " + std::string(value_type_name(v.elem_type));
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8:
      return "u8";
    case ValueType::I8:
      return "i8";
    case ValueType::U16:
      return "u16";
    case ValueType::I16:
      return "i16";
    case ValueType::U32:
      return "u32";
    case ValueType::I32:
      return "i32";
    case ValueType::F32:
      return "f32";
    case ValueType::BOOL:
      return "bool";
    case ValueType::STRING:
      return "string";
    case ValueType::ARRAY:
      return "array";
    case ValueType::U64:
      return "u64";
    case ValueType::I64:
      return "i64";
    case ValueType::F64:
      return "f64";
  }
  return "?";
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t TensorInfo::n_rows() const {
  int64_t n = 1;
  for (size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

size_t TensorInfo::row_bytes() const {
  return dims.empty() ? 0 : dtype_row_bytes(type, size_t(dims[0]));
}

void GgufFile::fail_key(std::string_view key, std::string_view what) const {
  throw FormatError(path_ + ": metadata " + quoted(key) + " " + std::string(what));
}

bool GgufFile::has(std::string_view key) const {
  return key_index_.count(key) != 0;
}

const MetaValue& GgufFile::value(std::string_view key) const {
  auto it = key_index_.find(key);
  if (it == key_index_.end()) throw FormatError(path_ + ": missing metadata key " + quoted(key));
  return entries_[it->second].value;
}

ValueType GgufFile::type_of(std::string_view key) const {
  return value(key).type;
}

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.emplace_back(e.key);
  return out;
}

const MetaValue& GgufFile::expect(std::string_view key, ValueType t) const {
  const MetaValue& v = value(key);
  if (v.type != t)
    fail_key(key, "is " + describe(v) + ", expected " + std::string(value_type_name(t)));
  return v;
}

const MetaValue& GgufFile::expect_array(std::string_view key) const {
  const MetaValue& v = value(key);
  if (v.type != ValueType::ARRAY) fail_key(key, "is " + describe(v) + ", expected an array");
  return v;
}

std::string GgufFile::get_string(std::string_view key) const {
  return std::string(expect(key, ValueType::STRING).str);
}
std::string GgufFile::get_string_or(std::string_view key, std::string def) const {
  return has(key) ? get_string(key) : def;
}

uint32_t GgufFile::get_u32(std::string_view key) const {
  const MetaValue& v = value(key);
  if (!is_int(v.type)) fail_key(key, "is " + describe(v) + ", expected an integer");
  const IntValue iv = scalar_int(v);
  if (iv.negative || iv.bits > std::numeric_limits<uint32_t>::max()) {
    fail_key(key, "value " + int_text(iv) + " does not fit in u32");
  }
  return uint32_t(iv.bits);
}
uint32_t GgufFile::get_u32_or(std::string_view key, uint32_t def) const {
  return has(key) ? get_u32(key) : def;
}

int64_t GgufFile::get_int(std::string_view key) const {
  const MetaValue& v = value(key);
  if (!is_int(v.type)) fail_key(key, "is " + describe(v) + ", expected an integer");
  const IntValue iv = scalar_int(v);
  if (!iv.negative && iv.bits > uint64_t(std::numeric_limits<int64_t>::max())) {
    fail_key(key, "value " + int_text(iv) + " does not fit in i64");
  }
  return int64_t(iv.bits);
}
int64_t GgufFile::get_int_or(std::string_view key, int64_t def) const {
  return has(key) ? get_int(key) : def;
}

float GgufFile::get_f32(std::string_view key) const {
  const MetaValue& v = value(key);
  if (v.type != ValueType::F32 && v.type != ValueType::F64) {
    fail_key(key, "is " + describe(v) + ", expected a float");
  }
  return float(std::bit_cast<double>(v.bits));
}
float GgufFile::get_f32_or(std::string_view key, float def) const {
  return has(key) ? get_f32(key) : def;
}

bool GgufFile::get_bool(std::string_view key) const {
  return expect(key, ValueType::BOOL).bits != 0;
}
bool GgufFile::get_bool_or(std::string_view key, bool def) const {
  return has(key) ? get_bool(key) : def;
}

size_t GgufFile::array_length(std::string_view key) const {
  return size_t(expect_array(key).count);
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const MetaValue& v = expect_array(key);
  if (v.elem_type != ValueType::STRING)
    fail_key(key, "is " + describe(v) + ", expected array of string");
  std::vector<std::string> out;
  out.reserve(size_t(v.count));
  const uint8_t* p = v.payload.data();
  for (uint64_t i = 0; i < v.count; ++i) {  // validated: each is len:u64 + len bytes
    uint64_t len;
    std::memcpy(&len, p, 8);
    out.emplace_back(reinterpret_cast<const char*>(p + 8), size_t(len));
    p += 8 + len;
  }
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const MetaValue& v = expect_array(key);
  if (!is_int(v.elem_type)) fail_key(key, "is " + describe(v) + ", expected array of integers");
  const size_t sz = int_size(v.elem_type);
  std::vector<int32_t> out(size_t(v.count));
  for (size_t i = 0; i < out.size(); ++i) {
    const IntValue iv = load_int(v.elem_type, v.payload.data() + i * sz);
    const bool fits = iv.negative ? int64_t(iv.bits) >= std::numeric_limits<int32_t>::min()
                                  : iv.bits <= uint64_t(std::numeric_limits<int32_t>::max());
    if (!fits)
      fail_key(key, "element " + std::to_string(i) + " = " + int_text(iv) + " does not fit in i32");
    out[i] = int32_t(int64_t(iv.bits));
  }
  return out;
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const MetaValue& v = expect_array(key);
  std::vector<float> out(size_t(v.count));
  if (v.elem_type == ValueType::F32) {
    if (!out.empty()) std::memcpy(out.data(), v.payload.data(), out.size() * 4);
  } else if (v.elem_type == ValueType::F64) {
    for (size_t i = 0; i < out.size(); ++i) {
      double d;
      std::memcpy(&d, v.payload.data() + 8 * i, 8);
      out[i] = float(d);
    }
  } else {
    fail_key(key, "is " + describe(v) + ", expected array of f32");
  }
  return out;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) throw FormatError(path_ + ": missing tensor " + quoted(name));
  return *t;
}

}  // namespace tern::gguf
