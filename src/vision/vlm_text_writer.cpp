#include "tern/vision/vlm_text_writer.h"

#include <cstring>

#include "tern/core/error.h"
#include "tern/gguf/gguf_file.h"
#include "tern/gguf/gguf_writer.h"

namespace tern::vision {

using gguf::ValueType;

std::vector<std::string> smolvlm_added_tokens() {
  std::vector<std::string> t{"<fake_token_around_image>", "<image>", "<end_of_utterance>",
                             "<global-img>"};
  for (int r = 1; r <= 6; ++r)
    for (int c = 1; c <= 6; ++c)
      t.push_back("<row_" + std::to_string(r) + "_col_" + std::to_string(c) + ">");
  for (int i = 0; t.size() < 128; ++i)
    t.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  return t;
}

namespace {

template <typename T>
std::vector<T> array_of(const gguf::MetaValue& v) {
  std::vector<T> out(v.count);
  std::memcpy(out.data(), v.payload.data(), v.count * sizeof(T));
  return out;
}

// Copies one metadata value (the types GGUF text models use).
void copy_value(const gguf::GgufFile& f, const std::string& k, gguf::GgufWriter& w) {
  const gguf::MetaValue& v = f.value(k);
  double d = 0;
  std::memcpy(&d, &v.bits, sizeof d);
  switch (v.type) {
    case ValueType::U8:
      return w.set_u8(k, uint8_t(v.bits));
    case ValueType::I8:
      return w.set_i8(k, int8_t(v.bits));
    case ValueType::U16:
      return w.set_u16(k, uint16_t(v.bits));
    case ValueType::I16:
      return w.set_i16(k, int16_t(v.bits));
    case ValueType::U32:
      return w.set_u32(k, uint32_t(v.bits));
    case ValueType::I32:
      return w.set_i32(k, int32_t(v.bits));
    case ValueType::U64:
      return w.set_u64(k, v.bits);
    case ValueType::I64:
      return w.set_i64(k, int64_t(v.bits));
    case ValueType::F32:
      return w.set_f32(k, float(d));
    case ValueType::F64:
      return w.set_f64(k, d);
    case ValueType::BOOL:
      return w.set_bool(k, v.bits != 0);
    case ValueType::STRING:
      return w.set_string(k, std::string(v.str));
    case ValueType::ARRAY:
      switch (v.elem_type) {
        case ValueType::STRING:
          return w.set_string_array(k, f.get_string_array(k));
        case ValueType::I32:
          return w.set_i32_array(k, array_of<int32_t>(v));
        case ValueType::U32:
          return w.set_array(k, array_of<uint32_t>(v));
        case ValueType::F32:
          return w.set_f32_array(k, array_of<float>(v));
        default:
          break;
      }
      break;
    default:
      break;
  }
  throw FormatError(f.path() + ": cannot copy metadata key " + k + " of type " +
                    std::string(gguf::value_type_name(v.type)));
}

}  // namespace

std::vector<std::string> audio_wrap_tokens() {
  return {"<|audio_bos|>", "<|audio_eos|>", "[BEGIN_AUDIO]"};
}

int write_smolvlm_text(const std::string& from, const std::string& out) {
  return write_text_with_tokens(from, out, smolvlm_added_tokens(), "SmolVLM tokens");
}

int write_text_with_tokens(const std::string& from, const std::string& out,
                           const std::vector<std::string>& added, const std::string& label) {
  const gguf::GgufFile f = gguf::GgufFile::open(from);
  const std::string arch = f.get_string("general.architecture");
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  const size_t n_old = tokens.size();
  const gguf::MetaValue& tt = f.value("tokenizer.ggml.token_type");
  if (tt.elem_type != ValueType::I32 || tt.count != n_old)
    throw FormatError(from + ": tokenizer.ggml.token_type is not one i32 per token");
  auto types = array_of<int32_t>(tt);
  for (const std::string& t : added) {
    for (const std::string& have : tokens)
      if (have == t) throw InvalidArgument(from + " already has " + t);
    tokens.push_back(t);
    types.push_back(3);  // control
  }
  const int64_t n_vocab = int64_t(tokens.size());
  gguf::GgufWriter w;
  for (const std::string& k : f.keys()) {
    if (k == "tokenizer.ggml.tokens") {
      w.set_string_array(k, tokens);
    } else if (k == "tokenizer.ggml.token_type") {
      w.set_i32_array(k, types);
    } else if (k == "tokenizer.ggml.scores") {
      auto scores = array_of<float>(f.value(k));
      scores.resize(size_t(n_vocab), 0.0f);
      w.set_f32_array(k, scores);
    } else if (k == arch + ".vocab_size") {
      w.set_u32(k, uint32_t(n_vocab));
    } else if (k == "general.name") {
      w.set_string(k, std::string(f.get_string(k)) + " + " + label + " (tern gen-vlm-text)");
    } else {
      copy_value(f, k, w);
    }
  }
  for (const gguf::TensorInfo& t : f.tensors()) {
    std::vector<uint8_t> data(t.data, t.data + t.nbytes);
    std::vector<int64_t> dims = t.dims;
    if ((t.name == "token_embd.weight" || t.name == "output.weight") && dims.size() == 2 &&
        dims[1] == int64_t(n_old)) {
      // New rows: copies of spread-out existing rows (same type and scale).
      const size_t rb = t.row_bytes();
      for (int64_t i = int64_t(n_old); i < n_vocab; ++i) {
        const size_t src = size_t((i - int64_t(n_old)) * 379 + 1000) % n_old;
        data.insert(data.end(), t.data + src * rb, t.data + (src + 1) * rb);
      }
      dims[1] = n_vocab;
    }
    w.add_tensor(t.name, t.type, dims, std::move(data));
  }
  w.write(out);
  return int(n_vocab);
}

}  // namespace tern::vision
