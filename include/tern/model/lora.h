#pragma once
// LoRA adapters in llama.cpp's GGUF adapter format, applied per batch row
// beside the base weights (which are never copied or changed).
//
// File: general.type = "adapter", adapter.type = "lora", adapter.lora.alpha
// (f32), general.architecture = the base's; for any of a layer's linear
// weights <base name>.lora_a (ggml dims {n_in, rank}: rank rows of n_in) and
// <base name>.lora_b ({rank, n_out}: n_out rows of rank). A layer's output
// becomes y = W x + s B (A x) with s = scale * alpha / rank (scale * 1 when
// alpha is 0), as llama.cpp computes it; A.B is never formed.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "tern/kernels/gemm_jobs.h"
#include "tern/kernels/packed.h"
#include "tern/model/config.h"

namespace tern {

class TaskPool;
constexpr int kMaxLoraRank = 512;

// The linear layers an adapter may touch, in a layer's order.
enum class LoraSlot : uint8_t { Q, K, V, O, Gate, Up, Down };
constexpr int kLoraSlots = 7;
const char* lora_slot_tensor(LoraSlot s);  // "attn_q", ... "ffn_down"

// One adapted weight's A and B, stored for the int8 tile kernels (packed.h):
// both Int8Sym, per row and group of 32 an fp16 scale. A x then reads the
// same quantized activations as the base weight, and B u is a GEMM with a
// reduction of `rank` (zero-padded to a group). About a quarter of the fp32
// bytes a step streams per adapter.
//
// A rank of at most 16 would fill half a group; instead B is packed two
// rows to a group (b_pairs): row j of `b` is [B[2j], B[2j + 1]], each
// zero-padded to 16, and each row of u enters as two activation rows, [u, 0]
// and [0, u], whose products are outputs 2j and 2j + 1. B's bytes halve; a
// group's scale covers two rows of B.
struct LoraMatrix {
  int rank = 0, n_in = 0, n_out = 0;
  kernels::PackedMatrix a;  // (rank, n_in)
  kernels::PackedMatrix b;  // (n_out, lora_rank_padded(rank)), or (ceil(n_out / 2), 32) if b_pairs
  bool b_pairs = false;
  bool empty() const { return rank == 0; }
};
// B's reduction length: rank rounded up to the quantization group.
constexpr int lora_rank_padded(int rank) {
  return (rank + kernels::kGroup - 1) / kernels::kGroup * kernels::kGroup;
}

class LoraAdapter {
 public:
  // Reads and validates `path` against the base model's config. Throws
  // FormatError naming the file and the offending tensor or key: not a LoRA
  // adapter, another architecture, a tensor that is not a supported linear
  // layer, a lone lora_a/lora_b, a shape that does not fit the base, or
  // non-finite values.
  // A file larger than lora_max_file_bytes(base) is refused before it is
  // parsed; a FIFO or device is refused without waiting on it (IoError).
  static std::shared_ptr<const LoraAdapter> load(const std::string& path, const ModelConfig& base);

  const std::string& path() const { return path_; }
  float alpha() const { return alpha_; }
  // SHA-256 of the file's bytes: the adapter's identity in the prefix cache.
  const std::array<uint8_t, 32>& digest() const { return digest_; }
  int n_matrices() const { return n_matrices_; }
  int max_rank() const { return max_rank_; }
  // nullptr when the adapter leaves that layer's weight alone.
  const LoraMatrix* get(int layer, LoraSlot s) const {
    const LoraMatrix& m = layers_[size_t(layer)][size_t(s)];
    return m.empty() ? nullptr : &m;
  }
  float scale(const LoraMatrix& m, float user_scale) const {
    return alpha_ != 0.0f ? user_scale * alpha_ / float(m.rank) : user_scale;
  }

 private:
  std::string path_;
  float alpha_ = 0;
  std::array<uint8_t, 32> digest_{};
  int n_matrices_ = 0, max_rank_ = 0;
  std::vector<std::array<LoraMatrix, kLoraSlots>> layers_;  // (n_layers, slot)
};

// The largest file a LoRA adapter for `base` can be: every layer's seven
// slots at kMaxLoraRank in fp32, plus 16 MiB of metadata.
size_t lora_max_file_bytes(const ModelConfig& base);

// What a batch entry runs with: an adapter and its scale (no adapter: base).
struct LoraSelection {
  std::shared_ptr<const LoraAdapter> adapter;
  float scale = 1.0f;
  explicit operator bool() const { return adapter != nullptr && scale != 0.0f; }
};

// The prefix cache's salt for a sequence run with `sel` (the chain root's
// key): all zeros for the base model, else SHA-256 of the adapter file's
// digest and the scale, so KV computed under one adapter (or scale) is never
// reused under another.
std::array<uint8_t, 32> lora_salt(const LoraSelection& sel);

// The adapters a server holds, by name; thread-safe. Unloading drops the
// registry's reference only: requests running with the adapter keep theirs
// and finish on it.
class LoraRegistry {
 public:
  // Loads `path` against `base` as `name` (letters, digits, '-', '_', '.';
  // 1..64 characters). Throws InvalidArgument for a bad or taken name,
  // FormatError / IoError for a bad file.
  std::shared_ptr<const LoraAdapter> load(const std::string& name, const std::string& path,
                                          const ModelConfig& base);
  // Throws InvalidArgument (a message that does not repeat the name) unless
  // `name` is 1..64 letters, digits, '-', '_' or '.'.
  static void check_name(const std::string& name);
  bool remove(const std::string& name);  // false when there was none
  std::shared_ptr<const LoraAdapter> find(const std::string& name) const;  // nullptr if none
  std::vector<std::pair<std::string, std::shared_ptr<const LoraAdapter>>> list() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const LoraAdapter>> by_name_;
};

// Rows t0..t0+n of a batch that run `adapter` at `scale` (one per batch
// entry that has an adapter).
struct LoraRows {
  const LoraAdapter* adapter;
  float scale;
  int t0, n;
};

// One of a layer's linear weights applied to the step's quantized input x
// (T rows): y (T, w->n_out) = x W^T.
struct LoraLinear {
  LoraSlot slot;
  const kernels::PackedMatrix* w;
  float* y;
};

// Runs a layer's linear weights that share one input (q/k/v, gate/up, o,
// down) with the adapters' terms: for every output, y = x W^T over all rows,
// then y[t] += s B (A x[t]) on each adapter's rows (s = its scale for that
// weight). Two dispatches on the pool: the base products and every
// adapter's A x (rows grouped by adapter, so its A is read once for all of
// them, from the base's own quantized activations); then every B u
// (u quantized to int8 per row) added into y. Scratch grows as needed and is
// reused: no allocation once warm.
class LoraStep {
 public:
  void linear(int layer, std::span<const LoraLinear> outs, std::span<const LoraRows> rows,
              const kernels::QuantizedActs& x, TaskPool& pool);

 private:
  struct Part {  // one (output, adapter) pair
    int out;
    const LoraMatrix* m;
    const LoraAdapter* ad;
    int g0, g1;    // its rows in gathered order
    size_t u_off;  // A x of gathered row r (g0 <= r < g1) at u_[u_off + r * m->rank]
    size_t z_off;  // B u before scaling: (g1 - g0, m->n_out) at z_[z_off]
  };
  kernels::QuantizedActs gathered_;     // x's rows that run an adapter, grouped by adapter
  std::vector<int> row_of_;             // batch row of each gathered row
  std::vector<float> user_scale_;       // the scale its entry asked for
  std::vector<const LoraRows*> by_ad_;  // the entries, grouped by adapter
  std::vector<Part> parts_;
  std::vector<float> u_, upad_, z_;
  std::vector<float> scale_;   // (parts, 2 x gathered rows): each part's B-input row scales
  std::vector<int> pair_row_;  // (parts, 2 x gathered rows): the batch row of each
  std::vector<kernels::QuantizedActs> uq_;  // each part's u, int8
  std::vector<kernels::GemmJob> jobs_;
};

}  // namespace tern
