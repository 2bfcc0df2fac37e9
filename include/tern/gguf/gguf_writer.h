#pragma once
// A small GGUF v3 writer, used to build test models and fuzz seeds.
//
// Metadata keys keep the order they were first set in (setting a key again
// replaces its value). Tensors are laid out in the order added, each at an
// offset that is a multiple of the alignment (32, or general.alignment when
// set with set_u32), and each padded to the alignment as ggml does.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tern/core/dtype.h"
#include "tern/gguf/gguf_file.h"

namespace tern::gguf {

class GgufWriter {
 public:
  void set_u8(std::string key, uint8_t v);
  void set_i8(std::string key, int8_t v);
  void set_u16(std::string key, uint16_t v);
  void set_i16(std::string key, int16_t v);
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_i64(std::string key, int64_t v);
  void set_f32(std::string key, float v);
  void set_f64(std::string key, double v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);

  // The value exactly as another file holds it (type, bits, array payload).
  void set_value(std::string key, const MetaValue& v);

  void set_string_array(std::string key, const std::vector<std::string>& v);
  void set_i32_array(std::string key, const std::vector<int32_t>& v);
  void set_f32_array(std::string key, const std::vector<float>& v);
  // ARRAY of any scalar type T in {u8,i8,u16,i16,u32,i32,u64,i64,float,double,bool}.
  template <typename T>
  void set_array(std::string key, const std::vector<T>& v);

  // `data` is already encoded in `type`: n_rows * row_bytes bytes. Throws
  // InvalidArgument on a duplicate name, bad dims or a size mismatch.
  void add_tensor(std::string name, DType type, std::vector<int64_t> dims,
                  std::vector<uint8_t> data);
  // values: float[n_elements], stored as F32. Other types are encoded by the
  // caller (kernels::quantize_ref) and added with add_tensor: the writer only
  // lays out bytes, it knows no quantization.
  void add_tensor_f32(std::string name, std::vector<int64_t> dims, std::span<const float> values);

  std::vector<uint8_t> to_bytes() const;
  void write(const std::string& path) const;  // streams; throws IoError

 private:
  struct Kv {
    std::string key;
    std::vector<uint8_t> encoded;  // type:u32 followed by the value
  };
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
  };
  void set_encoded(std::string key, std::vector<uint8_t> encoded);
  void set_array_raw(std::string key, ValueType elem, uint64_t count, const void* data,
                     size_t elem_size);
  size_t alignment() const;
  std::vector<uint8_t> head_bytes() const;

  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace tern::gguf
