#pragma once
// A validated, memory-mapped GGUF file (versions 2 and 3, little-endian).
//
// File layout:
//   magic "GGUF" | version:u32 | n_tensors:u64 | n_kv:u64
//   n_kv x      { key:string | type:u32 | value }
//   n_tensors x { name:string | n_dims:u32 | dims:u64[n_dims] | type:u32 | offset:u64 }
//   padding to `alignment` (general.alignment, default 32)
//   tensor data; each tensor at data_start + offset, offset % alignment == 0
// where string = len:u64 | bytes, and an ARRAY value = elem_type:u32 | count:u64 | elems.
//
// open()/from_memory() validate everything before returning, so the getters
// and tensor views can trust the layout: no tensor reaches past the end of
// the bytes, every count was bounded by the bytes that remain. Strings and
// tensor data are views into the mapping; nothing big is copied.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/core/mapped_file.h"

namespace tern::gguf {

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

std::string_view value_type_name(ValueType t);  // "u32", "string", ... ("?" if unknown)

// One metadata value as stored. Scalars are decoded; strings and arrays are
// views into the file bytes (valid while the GgufFile lives).
struct MetaValue {
  ValueType type = ValueType::U8;
  uint64_t bits = 0;     // integer/bool: value (signed ones sign-extended); F32/F64: as double bits
  std::string_view str;  // STRING
  ValueType elem_type = ValueType::U8;  // ARRAY
  uint64_t count = 0;                   // ARRAY: number of elements
  std::span<const uint8_t> payload;     // ARRAY: the encoded elements
};

struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> dims;      // dims[0] = row length (fastest varying), 1..4 dims
  uint64_t offset = 0;            // relative to the data section, multiple of the alignment
  size_t nbytes = 0;              // n_rows() * row_bytes()
  const uint8_t* data = nullptr;  // points into the mapping, nbytes readable

  int64_t n_elements() const;
  int64_t n_rows() const;  // product of dims[1..]
  size_t row_bytes() const;
};

class GgufFile {
 public:
  // Maps and validates; throws IoError if it cannot be read, FormatError
  // "<path>: <what is wrong>" if it is not a valid GGUF file.
  static GgufFile open(const std::string& path);
  // Same validation over caller-owned bytes (not copied: keep them alive).
  // `name` stands for the path in messages.
  static GgufFile from_memory(std::span<const uint8_t> bytes, std::string name);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  size_t data_offset() const { return data_offset_; }  // start of the tensor data section

  // --- metadata ---
  bool has(std::string_view key) const;
  ValueType type_of(std::string_view key) const;       // throws FormatError if missing
  const MetaValue& value(std::string_view key) const;  // throws FormatError if missing
  std::vector<std::string> keys() const;               // in file order

  // Typed getters throw FormatError naming the file and key when the key is
  // missing or holds another type; the *_or variants return `def` when the
  // key is missing (and still throw on a wrong type).
  std::string get_string(std::string_view key) const;
  std::string get_string_or(std::string_view key, std::string def) const;
  uint32_t get_u32(std::string_view key) const;  // any integer type whose value fits
  uint32_t get_u32_or(std::string_view key, uint32_t def) const;
  int64_t get_int(std::string_view key) const;  // any integer type whose value fits
  int64_t get_int_or(std::string_view key, int64_t def) const;
  float get_f32(std::string_view key) const;  // F32 or F64
  float get_f32_or(std::string_view key, float def) const;
  bool get_bool(std::string_view key) const;
  bool get_bool_or(std::string_view key, bool def) const;

  std::vector<std::string> get_string_array(std::string_view key) const;  // ARRAY of STRING
  std::vector<int32_t> get_i32_array(
      std::string_view key) const;  // ARRAY of integers that fit in i32
  std::vector<float> get_f32_array(std::string_view key) const;  // ARRAY of F32 or F64
  size_t array_length(std::string_view key) const;               // throws if not an ARRAY

  // --- tensors ---
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;  // nullptr if absent
  const TensorInfo& tensor(std::string_view name) const;  // throws "<path>: missing tensor 'x'"

  std::span<const uint8_t> file_bytes() const { return bytes_; }
  const MappedFile& mapping() const { return mapping_; }  // empty when from_memory

 private:
  GgufFile() = default;
  friend class Parser;
  [[noreturn]] void fail_key(std::string_view key, std::string_view what) const;
  const MetaValue& expect(std::string_view key, ValueType t) const;
  const MetaValue& expect_array(std::string_view key) const;

  struct Entry {
    std::string_view key;  // view into bytes_
    MetaValue value;
  };

  MappedFile mapping_;
  std::span<const uint8_t> bytes_;
  std::string path_;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<Entry> entries_;                              // file order
  std::unordered_map<std::string_view, size_t> key_index_;  // key -> entries_ index
  std::vector<TensorInfo> tensors_;                         // file order
  std::unordered_map<std::string_view, size_t>
      tensor_index_;  // name (view into bytes_) -> tensors_ index
};

}  // namespace tern::gguf
