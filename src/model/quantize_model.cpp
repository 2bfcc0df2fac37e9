// tern quantize's engine: choose each tensor's type (quantize_model.h), then
// dequantize and requantize its rows on the task pool, and write the file.
#include "tern/model/quantize_model.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>

#include "tern/core/error.h"
#include "tern/gguf/gguf_writer.h"
#include "tern/kernels/dequant.h"

namespace tern {
namespace {

// llama.cpp's general.file_type for a file mostly of one type (llama.h's
// llama_ftype; the K-quants as their _M recipes), or -1.
int file_type_of(DType t) {
  switch (t) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q4_1:
      return 3;
    case DType::Q8_0:
      return 7;
    case DType::Q5_0:
      return 8;
    case DType::Q5_1:
      return 9;
    case DType::Q2_K:
      return 10;
    case DType::Q3_K:
      return 12;
    case DType::Q4_K:
      return 15;
    case DType::Q5_K:
      return 17;
    case DType::Q6_K:
      return 18;
    case DType::IQ2_XXS:
      return 19;
    case DType::IQ2_XS:
      return 20;
    case DType::IQ3_XXS:
      return 23;
    case DType::IQ1_S:
      return 24;
    case DType::IQ4_NL:
      return 25;
    case DType::IQ3_S:
      return 26;
    case DType::IQ2_S:
      return 28;
    case DType::IQ4_XS:
      return 30;
    case DType::IQ1_M:
      return 31;
    case DType::BF16:
      return 32;
    case DType::TQ1_0:
      return 36;
    case DType::TQ2_0:
      return 37;
    case DType::MXFP4:
      return 38;
    case DType::NVFP4:
      return 39;
    case DType::Q1_0:
      return 40;
    case DType::Q2_0:
      return 41;
    default:
      return -1;
  }
}

bool is_linear_weight(const gguf::TensorInfo& t) {
  if (t.dims.size() < 2 || !t.name.ends_with("weight")) return false;
  for (const char* skip : {"pos_embd", "token_types", "conv1d", "ssm_"}) {
    if (t.name.find(skip) != std::string::npos) return false;
  }
  return true;
}

// Bits a weight takes in `t`, for "has fewer bits than Q8_0".
double bits_per_weight(DType t) {
  const DTypeTraits tr = dtype_traits(t);
  return 8.0 * tr.block_bytes / tr.block_elems;
}

struct Rule {
  std::regex re;
  DType type;
};

DType wanted_type(const gguf::GgufFile& in, const gguf::TensorInfo& t, const QuantizeOptions& o,
                  const std::vector<Rule>& rules, bool* keep) {
  *keep = false;
  for (const Rule& r : rules)
    if (std::regex_search(t.name, r.re)) return r.type;
  const bool is_output = t.name == "output.weight" ||
                         (t.name == "token_embd.weight" && !in.find_tensor("output.weight"));
  if (o.keep_output && is_output) {
    *keep = true;
    return t.type;
  }
  const bool edge = t.name == "output.weight" || t.name == "token_embd.weight";
  if (!o.pure && edge && bits_per_weight(o.type) < bits_per_weight(DType::Q8_0)) return DType::Q8_0;
  return o.type;
}

// Dequantizes and requantizes t's rows into `to`, rows split over the pool.
std::vector<uint8_t> requantize(const gguf::TensorInfo& t, DType to, TaskPool& pool) {
  const int64_t n = t.dims[0], rows = t.n_rows();
  const size_t in_row = t.row_bytes(), out_row = dtype_row_bytes(to, size_t(n));
  std::vector<uint8_t> out(out_row * size_t(rows));
  const int64_t per_task = std::max<int64_t>(1, rows / (8 * int64_t(pool.size())));
  const int64_t n_tasks = (rows + per_task - 1) / per_task;
  pool.run(n_tasks, [&](int64_t task, int) {
    std::vector<float> buf(static_cast<size_t>(n));
    const int64_t end = std::min(rows, (task + 1) * per_task);
    for (int64_t r = task * per_task; r < end; ++r) {
      kernels::dequantize_row(t.type, t.data + size_t(r) * in_row, buf.data(), n);
      kernels::quantize_row_ref(to, buf.data(), out.data() + size_t(r) * out_row, n);
    }
  });
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::vector<DType> quantize_types() {
  std::vector<DType> v;
  for (uint32_t raw = 0; raw < 64; ++raw) {
    if (dtype_traits(raw) && kernels::can_quantize(DType(raw))) v.push_back(DType(raw));
  }
  return v;
}

std::string quantize_type_names() {
  std::string s;
  for (DType t : quantize_types()) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  return s;
}

DType parse_quantize_type(const std::string& name) {
  for (DType t : quantize_types()) {
    if (lower(std::string(dtype_name(t))) == lower(name)) return t;
  }
  throw InvalidArgument("unknown quantization type '" + name +
                        "'; valid: " + quantize_type_names());
}

DType fallback_type(DType t) {
  switch (t) {
    case DType::Q4_K:
      return DType::Q5_0;
    case DType::Q5_K:
      return DType::Q5_1;
    case DType::Q6_K:
      return DType::Q8_0;
    case DType::Q1_0:
      return DType::Q2_0;
    case DType::NVFP4:
      return DType::MXFP4;
    case DType::Q2_0:
      return DType::Q4_0;
    default:
      break;
  }
  const uint32_t block = dtype_traits(t).block_elems;
  if (block == 256) return DType::IQ4_NL;  // Q2_K, Q3_K, IQ*, TQ*: a 4-bit 32-block
  if (block > 1) return DType::F16;        // 32-blocks: rows not whole 32s stay near lossless
  return DType::F32;
}

std::vector<QuantizedTensor> quantize_model(const gguf::GgufFile& in, const std::string& out_path,
                                            const QuantizeOptions& opts, TaskPool& pool) {
  std::vector<Rule> rules;
  for (const auto& [re, type] : opts.tensor_types) {
    try {
      rules.push_back({std::regex(re), type});
    } catch (const std::regex_error& e) {
      throw InvalidArgument("--tensor-type '" + re + "': not a regular expression: " + e.what());
    }
  }
  const std::string part = out_path + ".part";
  {  // fail before the work when OUT's directory is not writable
    std::FILE* f = std::fopen(part.c_str(), "wb");
    if (!f) throw IoError(part + ": cannot open for writing: " + std::strerror(errno));
    std::fclose(f);
  }
  gguf::GgufWriter w;
  for (const std::string& key : in.keys()) w.set_value(key, in.value(key));
  if (const int ft = file_type_of(opts.type); ft >= 0) w.set_u32("general.file_type", uint32_t(ft));
  std::vector<QuantizedTensor> report;
  for (const gguf::TensorInfo& t : in.tensors()) {
    QuantizedTensor q{t.name, t.type, t.type, t.type, false, t.nbytes, t.nbytes};
    bool keep = false;
    if (is_linear_weight(t) && kernels::can_dequantize(t.type)) {
      q.wanted = wanted_type(in, t, opts, rules, &keep);
      q.to = q.wanted;
      while (t.dims[0] % dtype_traits(q.to).block_elems != 0) q.to = fallback_type(q.to);
    }
    if (keep || !is_linear_weight(t) || !kernels::can_dequantize(t.type)) {
      w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    } else {
      std::vector<uint8_t> data = requantize(t, q.to, pool);
      q.requantized = true;
      q.bytes_out = data.size();
      w.add_tensor(t.name, q.to, t.dims, std::move(data));
    }
    report.push_back(std::move(q));
  }
  std::error_code ec;
  try {
    w.write(part);
  } catch (...) {
    std::filesystem::remove(part, ec);
    throw;
  }
  std::filesystem::rename(part, out_path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(part, ec);
    throw IoError(out_path + ": cannot write: " + why);
  }
  return report;
}

}  // namespace tern
