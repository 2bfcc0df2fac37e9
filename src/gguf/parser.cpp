// Parses and validates a GGUF file in one pass over its bytes. Every count
// is bounded by the bytes that remain before anything is reserved, and all
// size arithmetic is overflow-checked, so hostile input can only end in a
// FormatError naming the file and the problem.
#include <bit>
#include <limits>

#include "byte_reader.h"
#include "tern/core/log.h"
#include "tern/gguf/gguf_file.h"

namespace tern::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr size_t kMaxKeyBytes = 65535;   // spec: keys are at most 2^16 - 1 bytes
constexpr size_t kMaxNameBytes = 64;     // spec: tensor names are at most 64 bytes
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 4;  // ARRAY of ARRAY of ... at most this deep
// Smallest possible encodings, used to bound counts by the remaining bytes.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // key len, type, 1-byte value
constexpr uint64_t kMinTensorBytes = 8 + 4 + 8 + 4 + 8;  // name len, n_dims, 1 dim, type, offset

bool known_value_type(uint32_t t) {
  return t <= uint32_t(ValueType::F64);
}

// Encoded size of a scalar value type, 0 for STRING/ARRAY.
uint64_t scalar_size(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    default:
      return 0;
  }
}

// Smallest number of bytes one element of type t can take.
uint64_t min_elem_size(ValueType t) {
  if (t == ValueType::STRING) return 8;
  if (t == ValueType::ARRAY) return 4 + 8;
  return scalar_size(t);
}

}  // namespace

std::string quoted(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out = "'";
  const size_t n = std::min<size_t>(s.size(), 64);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += char(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > n) out += "...";
  return out + "'";
}

class Parser {
 public:
  explicit Parser(GgufFile& f) : f_(f), r_(f.bytes_, f.path_) {}

  void parse() {
    read_header();
    for (uint64_t i = 0; i < n_kv_; ++i) read_kv(i);
    read_alignment();
    f_.tensors_.reserve(size_t(n_tensors_));
    for (uint64_t i = 0; i < n_tensors_; ++i) read_tensor_info(i);
    place_tensor_data();
  }

 private:
  void read_header() {
    if (r_.size() < 4)
      r_.fail("too small to be a GGUF file (" + std::to_string(r_.size()) + " bytes)");
    if (r_.read<uint32_t>("magic") != kMagic) {
      // The file's bytes are never echoed: the file may be anything (a secret included).
      r_.fail_at(0, "not a GGUF file (it does not start with the 'GGUF' magic)");
    }
    const uint32_t v = r_.read<uint32_t>("version");
    if (v == 1) r_.fail_at(4, "GGUF version 1 is not supported (only versions 2 and 3)");
    if (__builtin_bswap32(v) == 2 || __builtin_bswap32(v) == 3) {
      r_.fail_at(4, "big-endian GGUF files are not supported");
    }
    if (v != 2 && v != 3) {
      r_.fail_at(4, "unsupported GGUF version " + std::to_string(v) + " (only versions 2 and 3)");
    }
    f_.version_ = v;
    n_tensors_ = r_.read<uint64_t>("tensor count");
    n_kv_ = r_.read<uint64_t>("metadata count");
    const uint64_t rem = r_.remaining();
    if (n_kv_ > rem / kMinKvBytes) {
      r_.fail_at(16, "metadata count " + std::to_string(n_kv_) + " is impossible for the " +
                         std::to_string(rem) + " bytes that follow");
    }
    if (n_tensors_ > (rem - n_kv_ * kMinKvBytes) / kMinTensorBytes) {
      r_.fail_at(8, "tensor count " + std::to_string(n_tensors_) + " is impossible for the " +
                        std::to_string(rem) + " bytes that follow");
    }
    f_.entries_.reserve(size_t(n_kv_));
  }

  void read_kv(uint64_t i) {
    const size_t at = r_.pos();
    const std::string what = "key of metadata entry " + std::to_string(i);
    const std::string_view key = r_.read_string(what);
    if (key.empty()) r_.fail_at(at, "metadata entry " + std::to_string(i) + " has an empty key");
    if (key.size() > kMaxKeyBytes) {
      r_.fail_at(at, "metadata key of entry " + std::to_string(i) + " is longer than 65535 bytes");
    }
    const uint32_t raw = r_.read<uint32_t>("value type of metadata " + quoted(key));
    if (!known_value_type(raw)) {
      r_.fail_at(r_.pos() - 4,
                 "metadata " + quoted(key) + " has unknown value type " + std::to_string(raw));
    }
    MetaValue v = read_value(ValueType(raw), key, 0);
    if (!f_.key_index_.emplace(key, f_.entries_.size()).second) {
      r_.fail_at(at, "duplicate metadata key " + quoted(key));
    }
    f_.entries_.push_back({key, v});
  }

  MetaValue read_value(ValueType t, std::string_view key, int depth) {
    MetaValue v;
    v.type = t;
    const std::string what = "value of metadata " + quoted(key);
    switch (t) {
      case ValueType::U8:
        v.bits = r_.read<uint8_t>(what);
        break;
      case ValueType::I8:
        v.bits = uint64_t(int64_t(r_.read<int8_t>(what)));
        break;
      case ValueType::U16:
        v.bits = r_.read<uint16_t>(what);
        break;
      case ValueType::I16:
        v.bits = uint64_t(int64_t(r_.read<int16_t>(what)));
        break;
      case ValueType::U32:
        v.bits = r_.read<uint32_t>(what);
        break;
      case ValueType::I32:
        v.bits = uint64_t(int64_t(r_.read<int32_t>(what)));
        break;
      case ValueType::U64:
        v.bits = r_.read<uint64_t>(what);
        break;
      case ValueType::I64:
        v.bits = uint64_t(r_.read<int64_t>(what));
        break;
      case ValueType::F32:
        v.bits = std::bit_cast<uint64_t>(double(r_.read<float>(what)));
        break;
      case ValueType::F64:
        v.bits = std::bit_cast<uint64_t>(r_.read<double>(what));
        break;
      case ValueType::BOOL: {
        const uint8_t b = r_.read<uint8_t>(what);
        if (b > 1)
          r_.fail_at(r_.pos() - 1,
                     "metadata " + quoted(key) + " has invalid bool byte " + std::to_string(b));
        v.bits = b;
        break;
      }
      case ValueType::STRING:
        v.str = r_.read_string(what);
        break;
      case ValueType::ARRAY:
        read_array(v, key, depth);
        break;
    }
    return v;
  }

  // ARRAY: elem_type:u32 | count:u64 | elements. Fills elem_type, count, payload.
  void read_array(MetaValue& v, std::string_view key, int depth) {
    const std::string name = "array " + quoted(key);
    if (depth >= kMaxArrayDepth) {
      r_.fail("metadata " + quoted(key) + " nests arrays deeper than " +
              std::to_string(kMaxArrayDepth));
    }
    const uint32_t raw = r_.read<uint32_t>("element type of " + name);
    if (!known_value_type(raw)) {
      r_.fail_at(r_.pos() - 4, name + " has unknown element type " + std::to_string(raw));
    }
    const auto et = ValueType(raw);
    const uint64_t count = r_.read<uint64_t>("length of " + name);
    if (count > r_.remaining() / min_elem_size(et)) {
      r_.fail_at(r_.pos() - 8, "truncated: " + name + " claims " + std::to_string(count) +
                                   " elements but only " + std::to_string(r_.remaining()) +
                                   " bytes remain");
    }
    const size_t start = r_.pos();
    if (const uint64_t sz = scalar_size(et)) {
      auto elems = r_.take(count * sz, name);
      if (et == ValueType::BOOL) {
        for (size_t j = 0; j < elems.size(); ++j) {
          if (elems[j] > 1)
            r_.fail_at(start + j, name + " has invalid bool byte " + std::to_string(elems[j]));
        }
      }
    } else if (et == ValueType::STRING) {
      const std::string what = "string in " + name;
      for (uint64_t j = 0; j < count; ++j) r_.read_string(what);
    } else {
      for (uint64_t j = 0; j < count; ++j) read_value(et, key, depth + 1);
    }
    v.elem_type = et;
    v.count = count;
    v.payload = f_.bytes_.subspan(start, r_.pos() - start);
  }

  void read_alignment() {
    auto it = f_.key_index_.find("general.alignment");
    if (it == f_.key_index_.end()) return;
    const MetaValue& v = f_.entries_[it->second].value;
    const bool is_int = scalar_size(v.type) != 0 && v.type != ValueType::F32 &&
                        v.type != ValueType::F64 && v.type != ValueType::BOOL;
    const bool is_signed = v.type == ValueType::I8 || v.type == ValueType::I16 ||
                           v.type == ValueType::I32 || v.type == ValueType::I64;
    if (!is_int)
      r_.fail("general.alignment must be an integer, not " + std::string(value_type_name(v.type)));
    if ((is_signed && int64_t(v.bits) <= 0) || v.bits == 0 ||
        v.bits > std::numeric_limits<uint32_t>::max() || !std::has_single_bit(v.bits)) {
      r_.fail("general.alignment " + std::to_string(int64_t(v.bits)) +
              " is not a power of two in [1, 2^31]");
    }
    f_.alignment_ = size_t(v.bits);
  }

  void read_tensor_info(uint64_t i) {
    const size_t at = r_.pos();
    const std::string_view name = r_.read_string("name of tensor " + std::to_string(i));
    const std::string tn = "tensor " + quoted(name);
    if (name.size() > kMaxNameBytes) r_.fail_at(at, tn + " has a name longer than 64 bytes");
    const uint32_t n_dims = r_.read<uint32_t>("dimension count of " + tn);
    if (n_dims < 1 || n_dims > kMaxDims) {
      r_.fail_at(r_.pos() - 4,
                 tn + " has " + std::to_string(n_dims) + " dimensions (must be 1 to 4)");
    }
    TensorInfo t;
    t.name = std::string(name);
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = r_.read<uint64_t>("dimensions of " + tn);
      if (dim == 0 || dim > uint64_t(std::numeric_limits<int64_t>::max())) {
        r_.fail_at(r_.pos() - 8, tn + " has invalid dimension " + std::to_string(d) + " = " +
                                     std::to_string(dim));
      }
      if (__builtin_mul_overflow(n_elements, int64_t(dim), &n_elements)) {
        r_.fail_at(r_.pos() - 8, tn + " has too many elements (overflow)");
      }
      t.dims.push_back(int64_t(dim));
    }
    const uint32_t raw_type = r_.read<uint32_t>("type of " + tn);
    const auto traits = dtype_traits(raw_type);
    if (!traits) {
      const std::string_view removed = removed_dtype_name(raw_type);
      r_.fail_at(r_.pos() - 4,
                 tn + " has unknown type " + std::to_string(raw_type) +
                     (removed.empty() ? std::string()
                                      : " (" + std::string(removed) +
                                            ", a layout llama.cpp no longer reads from GGUF)"));
    }
    t.type = DType(raw_type);
    if (t.dims[0] % traits->block_elems != 0) {
      r_.fail_at(at, tn + " has row length " + std::to_string(t.dims[0]) +
                         ", not a multiple of the " + std::string(traits->name) + " block size " +
                         std::to_string(traits->block_elems));
    }
    const uint64_t n_rows = uint64_t(n_elements / t.dims[0]);
    uint64_t row_bytes = 0, nbytes = 0;
    if (__builtin_mul_overflow(uint64_t(t.dims[0]) / traits->block_elems, traits->block_bytes,
                               &row_bytes) ||
        __builtin_mul_overflow(n_rows, row_bytes, &nbytes) || nbytes > f_.bytes_.size()) {
      r_.fail_at(at, tn + " needs more bytes than the file holds");
    }
    t.nbytes = size_t(nbytes);
    t.offset = r_.read<uint64_t>("data offset of " + tn);
    if (!f_.tensor_index_.emplace(name, f_.tensors_.size()).second) {
      r_.fail_at(at, "duplicate tensor name " + quoted(name));
    }
    f_.tensors_.push_back(std::move(t));
  }

  void place_tensor_data() {
    const size_t size = f_.bytes_.size();
    const size_t a = f_.alignment_;
    const size_t header_end = r_.pos();
    f_.data_offset_ = (header_end + a - 1) / a * a;  // header_end <= size, a <= 2^31: no overflow
    if (f_.tensors_.empty()) return;
    if (f_.data_offset_ > size) {
      r_.fail("truncated: the tensor data section (at byte " + std::to_string(f_.data_offset_) +
              ") starts past the end of the file (" + std::to_string(size) + " bytes)");
    }
    const size_t data_size = size - f_.data_offset_;
    for (TensorInfo& t : f_.tensors_) {
      const std::string tn = "tensor " + quoted(t.name);
      if (t.offset % a != 0) {
        r_.fail(tn + " data offset " + std::to_string(t.offset) +
                " is not a multiple of the alignment " + std::to_string(a));
      }
      if (t.offset > data_size || t.nbytes > data_size - t.offset) {
        r_.fail("truncated: " + tn + " data [" + std::to_string(t.offset) + ", +" +
                std::to_string(t.nbytes) + ") runs past the end of the data section (" +
                std::to_string(data_size) + " bytes)");
      }
      t.data = f_.bytes_.data() + f_.data_offset_ + size_t(t.offset);
    }
  }

  GgufFile& f_;
  ByteReader r_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

GgufFile GgufFile::from_memory(std::span<const uint8_t> bytes, std::string name) {
  GgufFile f;
  f.bytes_ = bytes;
  f.path_ = std::move(name);
  Parser(f).parse();
  log::get("gguf")->debug("{}: GGUF v{}, {} metadata keys, {} tensors, alignment {}", f.path_,
                          f.version_, f.entries_.size(), f.tensors_.size(), f.alignment_);
  return f;
}

GgufFile GgufFile::open(const std::string& path) {
  MappedFile m = MappedFile::open(path);
  const auto bytes = m.bytes();
  GgufFile f = from_memory(bytes, path);
  f.mapping_ = std::move(m);  // the mapping's address does not change on move
  return f;
}

}  // namespace tern::gguf
