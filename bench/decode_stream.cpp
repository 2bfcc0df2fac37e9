// decode_stream: the weight streaming of one decode token, alone, measured on
// the real matrices of a model (repacked as the engine does), so that the
// split of the GEMVs over the workers and the kernels' streaming rate can be
// compared with a plain read of the same bytes at the same moment. Variants
// run interleaved, one token each in turn, and medians are printed, so a busy
// or drifting machine (shared DRAM bandwidth) affects them all alike.
//
// A "token" is, per layer, matmul(q, k, v), matmul(o), matmul(gate, up),
// matmul(down), then the head: the engine's 4 dispatches a layer plus one.
// "read" sums the same bytes with plain 256-bit loads, each matrix split in
// one contiguous half (P-th) per worker: the rate the machine gives a simple
// stream just then.
//
// usage: decode_stream [-m MODEL] [-t THREADS] [--reps 60] [--variants LIST]
//   LIST: comma-separated, each "tasks" (the matmul split) optionally
//   followed by ":pfN" (GEMV prefetch distance N; default: the CPU's),
//   ":hpfN" (the head's distance),
//   ":small" (the weights on 4 KiB pages, each matrix in its own buffer, as
//   before the WeightArena; by default they are in one huge-page arena).
// Build: ninja -C build decode_stream
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../src/kernels/dispatch.h"
#include "tern/core/log.h"
#include "tern/core/task_pool.h"
#include "tern/gguf/gguf_file.h"
#include "tern/kernels/ops.h"
#include "tern/kernels/packed.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace tern;
using kernels::PackedMatrix;

struct Layer {
  PackedMatrix q, k, v, o, gate, up, down;
};

// A model's matrices, each in a buffer of its own (4 KiB pages), or copied
// into one WeightArena (huge pages), as the engine keeps them.
struct Weights {
  std::vector<Layer> layers;
  PackedMatrix head;
  kernels::WeightArena arena;
};

PackedMatrix copy_into(const PackedMatrix& m, kernels::WeightArena& arena) {
  PackedMatrix c{m.format, m.n_out, m.n_in, {}};
  uint8_t* dst = arena.take(m.bytes());
  std::memcpy(dst, m.data.data(), m.bytes());
  c.data = kernels::PackedBytes(dst, m.bytes());
  return c;
}

Weights in_arena(const Weights& w) {
  size_t total = (w.head.bytes() + 63) / 64 * 64;
  for (const Layer& L : w.layers)
    for (const PackedMatrix* m : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down})
      total += (m->bytes() + 63) / 64 * 64;
  Weights h{{}, {}, kernels::WeightArena(total)};
  for (const Layer& L : w.layers) {
    h.layers.push_back({copy_into(L.q, h.arena), copy_into(L.k, h.arena), copy_into(L.v, h.arena),
                        copy_into(L.o, h.arena), copy_into(L.gate, h.arena),
                        copy_into(L.up, h.arena), copy_into(L.down, h.arena)});
  }
  h.head = copy_into(w.head, h.arena);
  return h;
}

PackedMatrix load(const gguf::GgufFile& f, const std::string& name, kernels::WeightFormat* force) {
  const gguf::TensorInfo& t = f.tensor(name);
  const int n_in = int(t.dims[0]), n_out = int(t.n_rows());
  return kernels::pack_matrix(t.type, t.data, n_out, n_in,
                              force ? *force : kernels::default_format_for(t.type));
}

// Touches every 32 bytes of [p, p + n) with a vector load (the plain stream).
__attribute__((noinline)) int64_t read_sum(const uint8_t* p, size_t n) {
  __m256i acc[4] = {};
  for (size_t i = 0; i + 128 <= n; i += 128) {
    for (int j = 0; j < 4; ++j)
      acc[j] =
          _mm256_xor_si256(acc[j], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i) + j));
  }
  const __m256i x =
      _mm256_xor_si256(_mm256_xor_si256(acc[0], acc[1]), _mm256_xor_si256(acc[2], acc[3]));
  return _mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3);
}

// Plain read of the matrices of one dispatch, each split in contiguous parts.
void read_matrices(std::initializer_list<const PackedMatrix*> ms, TaskPool& pool) {
  static volatile int64_t sink;
  pool.run(pool.size(), [&](int64_t part, int) {
    int64_t s = 0;
    for (const PackedMatrix* m : ms) {
      const size_t n = m->bytes() / 128 * 128, per = (n / size_t(pool.size()) + 127) / 128 * 128;
      const size_t b = std::min(n, size_t(part) * per), e = std::min(n, b + per);
      s += read_sum(m->data.data() + b, e - b);
    }
    sink = sink + s;
  });
}

struct Variant {
  std::string name;
  bool read = false;
  int prefetch = -1;         // body GEMV prefetch distance (-1: the CPU's default)
  int head_prefetch = -1;    // the head's (-1: as the body)
  bool small_pages = false;  // the 4 KiB-page copy of the weights
  std::vector<double> body, head;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "models/gemma-3-270m-it-Q4_K_M.gguf", list = "tasks,tasks:small";
  int threads = 2, reps = 60;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[++i] : "";
    if (a == "-m") {
      model = v;
    } else if (a == "-t") {
      threads = std::atoi(v);
    } else if (a == "--reps") {
      reps = std::atoi(v);
    } else if (a == "--variants") {
      list = v;
    } else {
      std::fprintf(stderr, "unknown option %s (-m, -t, --reps, --variants)\n", a.c_str());
      return 2;
    }
  }
  log::init("warn");
  const gguf::GgufFile f = gguf::GgufFile::open(model);
  const int n_layers = int(f.get_int(f.get_string("general.architecture") + ".block_count"));
  Weights small;
  std::vector<Layer>& layers = small.layers;
  layers.resize(size_t(n_layers));
  size_t body_bytes = 0;
  for (int l = 0; l < n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    Layer& L = layers[size_t(l)];
    L.q = load(f, b + "attn_q.weight", nullptr);
    L.k = load(f, b + "attn_k.weight", nullptr);
    L.v = load(f, b + "attn_v.weight", nullptr);
    L.o = load(f, b + "attn_output.weight", nullptr);
    L.gate = load(f, b + "ffn_gate.weight", nullptr);
    L.up = load(f, b + "ffn_up.weight", nullptr);
    L.down = load(f, b + "ffn_down.weight", nullptr);
    for (const PackedMatrix* m : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down})
      body_bytes += m->bytes();
  }
  kernels::WeightFormat int8 = kernels::WeightFormat::Int8Sym;
  small.head =
      load(f, f.find_tensor("output.weight") ? "output.weight" : "token_embd.weight", &int8);
  const PackedMatrix& head = small.head;
  const Weights huge = in_arena(small);
  TaskPool pool(threads);
  const int d = layers[0].q.n_in, qd = layers[0].o.n_in,
            ff = layers[0].down.n_in;  // (d, q_dim, d_ff)
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  auto acts = [&](int n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = nd(rng);
    kernels::QuantizedActs qa;
    kernels::quantize_activations(x.data(), 1, n, qa, pool);
    return qa;
  };
  const kernels::QuantizedActs xd = acts(d), xq = acts(qd), xf = acts(ff);
  auto out = [](const PackedMatrix& m) { return std::vector<float>(size_t(m.n_out)); };
  const Layer& L0 = layers[0];
  std::vector<float> yq = out(L0.q), yk = out(L0.k), yv = out(L0.v), yd = out(L0.o),
                     yg = out(L0.gate), yu = out(L0.up), yh = out(head);

  kernels::active_kernels();  // sets the CPU's default prefetch distance
  const int default_pf = kernels::g_gemv_prefetch;
  std::vector<Variant> vs;
  vs.push_back({"read", true});
  vs.push_back({"read:small", true});
  vs.back().small_pages = true;
  for (size_t p = 0; p <= list.size();) {
    size_t e = list.find(',', p);
    if (e == std::string::npos) e = list.size();
    Variant v{list.substr(p, e - p)};
    if (const size_t c = v.name.find(":pf"); c != std::string::npos)
      v.prefetch = std::atoi(v.name.c_str() + c + 3);
    if (const size_t c = v.name.find(":hpf"); c != std::string::npos)
      v.head_prefetch = std::atoi(v.name.c_str() + c + 4);
    v.small_pages = v.name.find(":small") != std::string::npos;
    vs.push_back(v);
    p = e + 1;
  }
  for (int rep = -3; rep < reps; ++rep) {
    for (Variant& v : vs) {
      kernels::g_gemv_prefetch = v.prefetch >= 0 ? v.prefetch : default_pf;
      const auto t0 = Clock::now();
      const Weights& w = v.small_pages ? small : huge;
      for (int l = 0; l < n_layers; ++l) {
        const Layer& L = w.layers[size_t(l)];
        if (v.read) {
          read_matrices({&L.q, &L.k, &L.v}, pool);
          read_matrices({&L.o}, pool);
          read_matrices({&L.gate, &L.up}, pool);
          read_matrices({&L.down}, pool);
        } else {
          kernels::matmul({{&L.q, yq.data()}, {&L.k, yk.data()}, {&L.v, yv.data()}}, xd, pool);
          kernels::matmul(L.o, xq, yd.data(), pool);
          kernels::matmul({{&L.gate, yg.data()}, {&L.up, yu.data()}}, xd, pool);
          kernels::matmul(L.down, xf, yd.data(), pool);
        }
      }
      const auto t1 = Clock::now();
      if (v.head_prefetch >= 0) kernels::g_gemv_prefetch = v.head_prefetch;
      if (v.read)
        read_matrices({&w.head}, pool);
      else
        kernels::matmul(w.head, xd, yh.data(), pool);
      const auto t2 = Clock::now();
      if (rep < 0) continue;
      v.body.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      v.head.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
  }
  std::printf("%s, %d threads, %s kernels, body %.1f MB, head %.1f MB, %d reps (median)\n",
              model.c_str(), threads, kernels::kernel_isa(), body_bytes / 1e6, head.bytes() / 1e6,
              reps);
  // Indexed by WeightFormat.
  const char* fmt_names[] = {"int4", "int8", "int5", "nl4", "fp4", "f16", "bf16", "int5asym"};
  std::printf("layer 0:");
  for (const auto& [name, m] : {std::pair{"q", &L0.q},
                                {"k", &L0.k},
                                {"v", &L0.v},
                                {"o", &L0.o},
                                {"gate", &L0.gate},
                                {"up", &L0.up},
                                {"down", &L0.down}})
    std::printf(" %s %s %.0f KB", name, fmt_names[int(m->format)], m->bytes() / 1e3);
  std::printf("\n");
  const double rb = median(vs[0].body), rh = median(vs[0].head);
  for (const Variant& v : vs) {
    const double b = median(v.body), h = median(v.head);
    std::printf(
        "%-14s body %6.3f ms %5.1f GB/s (%.3fx read)  head %6.3f ms %5.1f GB/s (%.3fx read)"
        "  token %6.3f ms\n",
        v.name.c_str(), b, body_bytes / b / 1e6, rb / b, h, head.bytes() / h / 1e6, rh / h, b + h);
  }
  return 0;
}
