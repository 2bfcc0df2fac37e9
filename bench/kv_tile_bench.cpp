// kv_tile_bench: CPU time of one attention tile call (nr query rows against
// one 32-token block of one kv head, SmolLM2-135M's shape: 30 layers, 3 kv
// heads x 64), per kernel table, in thread CPU time (so other processes on
// the machine inflate it far less than wall time).
//   hot:  the same block again and again (staging and arithmetic only);
//   cold: every block of a --mib MiB arena in the engine's layout, walked
//         per (layer, head) as a decode step does, without and with the
//         next block's head area prefetched into L2 (what tile_blocks does);
//   span: the same walk in spans of 16 blocks (a segment), for tables with
//         a span kernel (prefill at depth), per block.
//
//   --count C --table NAME: only C hot calls of that table ("scalar" runs
//         its one-row kernel per row), nothing timed: for instruction counts
//         under an emulator (run with C and 0, take the difference / C).
//
// usage: kv_tile_bench [--rows N] [--mib M] [--reps R] [--count C --table NAME]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tern/core/aligned.h"
#include "tern/kv/kv_attend.h"

namespace tern::kv {
namespace {

double cpu_us() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) / 1e3;
}

struct Arena {
  KvLayout L = KvLayout::make(30, 3, 64, 32, KvType::Int8Fp8);
  size_t n_blocks;
  AlignedBuffer<uint8_t> mem;
  explicit Arena(size_t mib) : n_blocks(std::max<size_t>(1, (mib << 20) / L.block_bytes)) {
    mem = AlignedBuffer<uint8_t>(n_blocks * L.block_bytes);
    // Real rows: random normal keys and values through the codecs, so
    // every code and scale is one the engine writes.
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> k(size_t(L.head_dim)), v(size_t(L.head_dim));
    for (size_t b = 0; b < n_blocks; ++b)
      for (int l = 0; l < L.n_layers; ++l)
        for (int h = 0; h < L.n_kv_heads; ++h)
          for (int t = 0; t < L.block_tokens; ++t) {
            for (float& x : k) x = d(rng);
            for (float& x : v) x = d(rng);
            encode_token(L, k.data(), v.data(), slice(b, l) + size_t(h) * L.head_bytes, t);
          }
  }
  uint8_t* slice(size_t b, int l) {
    return mem.data() + b * L.block_bytes + size_t(l) * L.slice_bytes;
  }
};

// nr query rows of head_dim 64 (seeded), each in a fresh softmax state,
// every row attending the whole block.
struct TileRows {
  std::vector<float> qs, m, l, acc;
  std::vector<const float*> q;
  std::vector<int> n;
  TileRows(int nr, int block_tokens)
      : qs(size_t(nr) * 64),
        m(size_t(nr)),
        l(size_t(nr)),
        acc(size_t(nr) * 64),
        q(size_t(nr)),
        n(size_t(nr), block_tokens) {
    std::mt19937 rng(2);
    std::normal_distribution<float> d(0.0f, 0.3f);
    for (float& x : qs) x = d(rng);
    for (int r = 0; r < nr; ++r) {
      q[size_t(r)] = qs.data() + size_t(r) * 64;
      attend_start(64, &m[size_t(r)], &l[size_t(r)], acc.data() + size_t(r) * 64);
    }
  }
};

void run(const AttendKernels& K, Arena& A, int nr, int reps) {
  const KvLayout& L = A.L;
  const AttendTileFn tile = K.tile_for_type(L.type);
  TileRows t(nr, L.block_tokens);
  auto call = [&](const uint8_t* slice, int h) {
    tile(L, head_block(L, slice, h), nr, t.n.data(), t.q.data(), t.m.data(), t.l.data(),
         t.acc.data());
  };
  double best[3] = {1e30, 1e30, 1e30};
  for (int rep = 0; rep < reps; ++rep) {
    double t0 = cpu_us();
    const int hot_calls = 20000;
    for (int c = 0; c < hot_calls; ++c) call(A.slice(0, 0), c % 3);
    best[0] = std::min(best[0], (cpu_us() - t0) / hot_calls);
    for (int pf = 0; pf < 2; ++pf) {
      t0 = cpu_us();
      for (int ly = 0; ly < L.n_layers; ++ly)
        for (int h = 0; h < L.n_kv_heads; ++h)
          for (size_t b = 0; b < A.n_blocks; ++b) {
            if (pf && b + 1 < A.n_blocks) {
              const uint8_t* nx = A.slice(b + 1, ly) + size_t(h) * L.head_bytes;
              for (size_t o = 0; o < L.head_bytes; o += 64) __builtin_prefetch(nx + o, 0, 2);
            }
            call(A.slice(b, ly), h);
          }
      best[1 + pf] = std::min(best[1 + pf], (cpu_us() - t0) / double(90 * A.n_blocks));
    }
  }
  // Spans of 16 blocks (a segment) per (layer, head), when the table has
  // them: the prefill path at depth, per block.
  double span_us = 0;
  constexpr int kSpan = 16;
  const AttendSpanFn span = K.span_for_type(L.type);
  if (span && A.n_blocks >= size_t(kSpan)) {
    const size_t n_spans = A.n_blocks / kSpan;
    std::vector<int> ctx(size_t(nr), kSpan * L.block_tokens);
    HeadBlock hbs[kSpan];
    span_us = 1e30;
    for (int rep = 0; rep < reps; ++rep) {
      const double t0 = cpu_us();
      for (int ly = 0; ly < L.n_layers; ++ly)
        for (int h = 0; h < L.n_kv_heads; ++h)
          for (size_t sp = 0; sp < n_spans; ++sp) {
            for (int i = 0; i < kSpan; ++i)
              hbs[i] = head_block(L, A.slice(sp * kSpan + size_t(i), ly), h);
            span(L, hbs, kSpan, nr, ctx.data(), t.q.data(), t.m.data(), t.l.data(), t.acc.data());
          }
      span_us = std::min(span_us, (cpu_us() - t0) / double(90 * n_spans * kSpan));
    }
  }
  std::printf("%-7s rows %2d: hot %.3f us, cold %.3f us, cold + prefetch %.3f us per call", K.isa,
              nr, best[0], best[1], best[2]);
  if (span_us > 0) std::printf(", span of 16 (cold) %.3f us per block", span_us);
  std::printf("\n");
}

// calls hot calls of table K (the scalar table has one-row kernels only).
void count_calls(const AttendKernels& K, Arena& A, int nr, int calls) {
  const KvLayout& L = A.L;
  TileRows t(nr, L.block_tokens);
  const AttendTileFn tile = K.tile_for_type(L.type);
  const AttendBlockFn block = K.for_type(L.type);
  for (int c = 0; c < calls; ++c) {
    const HeadBlock hb = head_block(L, A.slice(0, 0), c % 3);
    if (tile) {
      tile(L, hb, nr, t.n.data(), t.q.data(), t.m.data(), t.l.data(), t.acc.data());
    } else {
      for (int r = 0; r < nr; ++r)
        block(L, hb, L.block_tokens, t.q[size_t(r)], &t.m[size_t(r)], &t.l[size_t(r)],
              t.acc.data() + size_t(r) * 64);
    }
  }
  std::printf("%s rows %d: %d calls (acc[0] %g)\n", K.isa, nr, calls, double(t.acc[0]));
}

}  // namespace
}  // namespace tern::kv

int main(int argc, char** argv) {
  int rows = 3, reps = 3, count = -1;
  size_t mib = 128;
  std::string table;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rows") rows = std::atoi(argv[i + 1]);
    if (a == "--mib") mib = size_t(std::atoi(argv[i + 1]));
    if (a == "--reps") reps = std::atoi(argv[i + 1]);
    if (a == "--count") count = std::atoi(argv[i + 1]);
    if (a == "--table") table = argv[i + 1];
  }
  if (rows < 1 || rows > tern::kv::kMaxTileRows) {
    std::fprintf(stderr, "--rows must be 1..%d\n", tern::kv::kMaxTileRows);
    return 2;
  }
  if (count >= 0) {
    tern::kv::Arena arena(1);
    for (const tern::kv::AttendKernels* k : tern::kv::available_attend_kernels())
      if (table == k->isa) {
        tern::kv::count_calls(*k, arena, rows, count);
        return 0;
      }
    std::fprintf(stderr, "no table %s on this CPU\n", table.c_str());
    return 2;
  }
  tern::kv::Arena arena(mib);
  // Every SIMD table this CPU runs, best first.
  const auto tables = tern::kv::available_attend_kernels();
  for (auto it = tables.rbegin(); it != tables.rend() && *it != &tern::kv::scalar_attend_kernels();
       ++it)
    tern::kv::run(**it, arena, rows, reps);
  return 0;
}
