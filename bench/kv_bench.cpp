// kv_bench: speed of the paged KV cache for the default model shape
// (3 kv heads x 64, GQA group 3, 32-token blocks).
//
// 1. Decode attention: one token attending a context of N positions, all kv
//    heads of one layer, per KV type and kernel ISA, against the plain path
//    (kernels::attention_f16 over contiguous fp16 rows, one call per kv head).
// 2. DRAM-flash decode: 30 layers, a 4096-token sequence, a DRAM budget that
//    holds a quarter of it; each layer "computes" for --layer-us (standing in
//    for the matmuls) and then attends. Step time and prefetch stalls per
//    prefetch distance, against the same sequence all in DRAM. The spill
//    file's page cache is dropped before every step (posix_fadvise), so reads
//    really go to the device.
//
// usage: kv_bench [--dir DIR] [--layer-us N] [--warm] [--flash-only]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tern/core/half.h"
#include "tern/core/log.h"
#include "tern/kernels/ops.h"
#include "tern/kv/paged_kv.h"

namespace tern::kv {
namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

constexpr int kHeads = 3, kHd = 64, kGroup = 3;

KvConfig shape(int layers, KvType t, size_t dram) {
  KvConfig c;
  c.n_layers = layers;
  c.n_kv_heads = kHeads;
  c.head_dim = kHd;
  c.type = t;
  c.max_seqs = 4;
  c.max_seq_tokens = 8192;
  c.dram_bytes = dram;
  return c;
}

// Fills seq with n random tokens' K/V (every layer).
void fill(PagedKv& kv, SeqId s, int n, int layers) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> k(kHeads * kHd), v(kHeads * kHd);
  for (int p0 = 0; p0 < n; p0 += 256) {
    const int m = std::min(256, n - p0);
    kv.reserve(s, m);
    for (int l = 0; l < layers; ++l) {
      for (int p = p0; p < p0 + m; ++p) {
        for (auto& x : k) x = d(rng);
        for (auto& x : v) x = d(rng);
        kv.write(s, l, p, k.data(), v.data());
      }
    }
    kv.commit(s, std::vector<int32_t>(size_t(m), 7));
  }
}

void attention_speed() {
  std::printf("decode attention, one layer, %d kv heads x %d, group %d (us per token-layer)\n",
              kHeads, kHd, kGroup);
  std::printf("%-10s %-7s %9s %9s %9s\n", "kv type", "isa", "ctx 512", "ctx 2048", "ctx 8192");
  std::vector<float> q(kHeads * kGroup * kHd, 0.05f), out(q.size());
  auto time_it = [](auto&& fn) {
    int reps = 0;
    const auto t0 = Clock::now();
    do fn(), ++reps;
    while (us_since(t0) < 200000);
    return us_since(t0) / reps;
  };
  for (KvType t : {KvType::F16, KvType::Int8, KvType::Int8Fp8, KvType::Int4Fp8}) {
    const std::vector<const AttendKernels*> ks = available_attend_kernels();
    for (const AttendKernels* K : ks) {
      std::printf("%-10s %-7s", to_string(t), K->isa);
      for (int ctx : {512, 2048, 8192}) {
        PagedKv kv(shape(1, t, size_t(64) << 20));
        kv.set_kernels(*K);
        const SeqId s = kv.create();
        fill(kv, s, ctx, 1);
        const double us = time_it([&] {
          for (int h = 0; h < kHeads; ++h)
            kv.attend(s, 0, h, ctx, q.data() + h * kGroup * kHd, kGroup, out.data());
        });
        std::printf(" %9.1f", us);
      }
      std::printf("\n");
    }
  }
  std::printf("%-10s %-7s", "plain f16", kernels::kernel_isa());
  for (int ctx : {512, 2048, 8192}) {
    std::vector<uint16_t> K(size_t(ctx) * kHeads * kHd, f32_to_fp16(0.3f)),
        V(K.size(), f32_to_fp16(0.1f));
    const double us = time_it([&] {
      for (int kvh = 0; kvh < kHeads; ++kvh) {
        kernels::attention_f16(q.data() + kvh * kGroup * kHd, out.data() + kvh * kGroup * kHd, 0, 1,
                               kGroup, ctx, K.data() + kvh * kHd, V.data() + kvh * kHd,
                               kHeads * kHd, kHd);
      }
    });
    std::printf(" %9.1f", us);
  }
  std::printf("\n\n");
}

void drop_page_cache(const std::string& dir) {
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    const int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

void flash_speed(const std::string& dir, int layer_us, bool warm) {
  const int layers = 30, ctx = 4096, steps = 20;
  const KvType t = KvType::Int8Fp8;
  const size_t bytes = KvLayout::make(layers, kHeads, kHd, 32, t).block_bytes * (ctx / 32 + 2);
  std::printf(
      "decode step, %d layers, %d-token context, %s KV (%.1f MiB), %d us of other work per layer, "
      "%s\n",
      layers, ctx, to_string(t), double(bytes) / (1 << 20), layer_us,
      warm ? "spill file in the page cache" : "page cache dropped before each step");
  std::printf("%-26s %12s %10s %12s %12s\n", "setup", "ms/step", "stalls", "stall ms", "MiB read");
  std::vector<float> q(kHeads * kGroup * kHd, 0.05f), out(q.size()), k(kHeads * kHd, 0.1f);
  struct Case {
    const char* name;
    bool flash;
    int prefetch;
  } cases[] = {{"all in DRAM", false, 0},
               {"3/4 on flash, prefetch 0", true, 0},
               {"3/4 on flash, prefetch 1", true, 1},
               {"3/4 on flash, prefetch 2", true, 2}};
  for (const Case& c : cases) {
    KvConfig cfg =
        shape(layers, t, c.flash ? bytes / 4 + (size_t(8) << 20) : bytes + (size_t(1) << 20));
    if (c.flash) {
      cfg.flash_dir = dir;
      cfg.flash_bytes = bytes * 2;
      cfg.prefetch_layers = c.prefetch;
      cfg.staging_bytes = size_t(8) << 20;
    }
    PagedKv kv(cfg);
    const SeqId s = kv.create();
    fill(kv, s, ctx, layers);
    const KvStats before = kv.stats();
    double total = 0;
    for (int step = 0; step < steps; ++step) {
      if (c.flash && !warm) drop_page_cache(dir);
      const int pos = kv.length(s);
      kv.reserve(s, 1);
      const auto t0 = Clock::now();
      kv.begin_step(std::vector<SeqId>{s});
      for (int l = 0; l < layers; ++l) {
        kv.begin_layer(l);
        const auto w0 = Clock::now();
        while (us_since(w0) < layer_us) {
        }
        kv.write(s, l, pos, k.data(), k.data());
        for (int h = 0; h < kHeads; ++h)
          kv.attend(s, l, h, pos + 1, q.data() + h * kGroup * kHd, kGroup, out.data());
      }
      kv.end_step();
      total += us_since(t0);
      kv.commit(s, std::vector<int32_t>{7});
    }
    const KvStats st = kv.stats();
    std::printf("%-26s %12.2f %10ld %12.2f %12.1f\n", c.name, total / steps / 1000.0,
                long(st.prefetch_stalls - before.prefetch_stalls),
                st.prefetch_stall_ms - before.prefetch_stall_ms,
                double(st.bytes_prefetched - before.bytes_prefetched) / (1 << 20));
  }
}

}  // namespace
}  // namespace tern::kv

int main(int argc, char** argv) {
  std::string dir = tern::kv::default_flash_dir() + "-bench";
  int layer_us = 500;
  bool warm = false, flash_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--warm") warm = true;
    if (std::string(argv[i]) == "--flash-only") flash_only = true;
    if (i + 1 >= argc) break;
    if (std::string(argv[i]) == "--dir")
      dir = argv[++i];
    else if (std::string(argv[i]) == "--layer-us")
      layer_us = std::stoi(argv[++i]);
  }
  tern::log::init("warn");
  if (!flash_only) tern::kv::attention_speed();
  tern::kv::flash_speed(dir, layer_us, warm);
  std::filesystem::remove_all(dir);
  return 0;
}
