// Every fast matrix-product table against the scalar reference, on random
// shapes with odd row counts, partial last tiles, sub-ranges of rows and tiles
// and unaligned activation rows. The fast kernels walk the groups in the same
// order with the same fused multiply-adds, so results must be bit-identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tern/core/task_pool.h"
#include "tern/kernels/dequant.h"
#include "tern/kernels/ops.h"
#include "test_tables.h"

namespace tern::kernels {
namespace {

using test::fast_tables;
using test::Floats;

constexpr WeightFormat kFormats[] = {WeightFormat::Int4Asym, WeightFormat::Int8Sym,
                                     WeightFormat::Int5Sym,  WeightFormat::Int5Asym,
                                     WeightFormat::Nl4,      WeightFormat::Fp4};

PackedMatrix random_matrix(WeightFormat fmt, int n_out, int n_in, std::mt19937& rng) {
  // Through the real GGUF source types so the layout matches load time.
  const DType src = fmt == WeightFormat::Int4Asym   ? DType::Q4_1
                    : fmt == WeightFormat::Int5Sym  ? DType::Q5_0
                    : fmt == WeightFormat::Int5Asym ? DType::Q5_1
                    : fmt == WeightFormat::Nl4      ? DType::IQ4_NL
                    : fmt == WeightFormat::Fp4      ? DType::MXFP4
                                                    : DType::Q8_0;
  std::normal_distribution<float> dist(0.0f, 0.1f);
  std::vector<float> row(static_cast<size_t>(n_in));
  const size_t rb = dtype_row_bytes(src, size_t(n_in));
  std::vector<uint8_t> bytes(rb * size_t(n_out));
  for (int r = 0; r < n_out; ++r) {
    for (auto& x : row) x = dist(rng) + 0.01f * float(r % 5);
    quantize_row_ref(src, row.data(), bytes.data() + rb * size_t(r), n_in);
  }
  return pack_matrix(src, bytes.data(), n_out, n_in, fmt);
}

QuantizedActs quantized(const KernelTable& k, int rows, int n_in, std::mt19937& rng) {
  Floats x(rows * n_in, 1, rng, 2.0f);
  if (rows > 1) std::memset(x.data() + n_in, 0, sizeof(float) * kGroup);  // an all-zero group
  QuantizedActs qa;
  qa.resize(rows, n_in);
  k.quantize_rows(x.data(), 0, rows, n_in, qa);
  return qa;
}

TEST(Gemm, FastTablesMatchScalarBitForBit) {
  const auto tables = fast_tables();
  if (tables.empty()) GTEST_SKIP() << "no fast kernels on this CPU";
  const KernelTable& ref = scalar_kernels();
  std::mt19937 rng(42);
  const int shapes[][3] = {{1, 8, 32},     {1, 1, 64},   {2, 9, 96},  {3, 17, 32},
                           {4, 24, 576},   {5, 7, 160},  {7, 40, 64}, {16, 33, 96},
                           {17, 16, 1536}, {9, 65, 128}, {6, 12, 64}, {8, 30, 96}};
  for (WeightFormat fmt : kFormats) {
    for (const auto& s : shapes) {
      const int rows = s[0], n_out = s[1], n_in = s[2];
      const PackedMatrix w = random_matrix(fmt, n_out, n_in, rng);
      const QuantizedActs qa = quantized(ref, rows, n_in, rng);
      std::vector<float> want(size_t(rows) * n_out, -1.0f);
      ref.gemm_tiles(w, qa, want.data(), 0, rows, 0, w.n_tiles());
      for (const KernelTable* k : tables) {
        std::vector<float> got(size_t(rows) * n_out, -2.0f);
        k->gemm_tiles(w, qa, got.data(), 0, rows, 0, w.n_tiles());
        ASSERT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * got.size()), 0)
            << k->isa << " rows " << rows << " n_out " << n_out << " n_in " << n_in;
        // A sub-range of rows and tiles writes exactly those outputs.
        test::expect_subrange_writes_only_it(*k, w, qa, want, rows);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Every row count from 1 to 70 (the GEMV, every remainder of every
// micro-kernel's rows, several micro-kernels a tile), with a partial last
// tile: bit-identical to the reference in every table.
TEST(Gemm, EveryRowCountMatchesScalarBitForBit) {
  const auto tables = fast_tables();
  if (tables.empty()) GTEST_SKIP() << "no fast kernels on this CPU";
  const KernelTable& ref = scalar_kernels();
  std::mt19937 rng(23);
  const int n_out = 21, n_in = 96, max_rows = 70;
  const QuantizedActs qa = quantized(ref, max_rows, n_in, rng);
  for (WeightFormat fmt : kFormats) {
    const PackedMatrix w = random_matrix(fmt, n_out, n_in, rng);
    std::vector<float> want(size_t(max_rows) * n_out);
    ref.gemm_tiles(w, qa, want.data(), 0, max_rows, 0, w.n_tiles());
    for (const KernelTable* k : tables) {
      for (int rows = 1; rows <= max_rows; ++rows) {
        const int r0 = rows % 3;  // start at rows 0, 1 or 2 (unaligned row offsets)
        if (r0 + rows > max_rows) continue;
        std::vector<float> got(size_t(max_rows) * n_out, -2.0f);
        k->gemm_tiles(w, qa, got.data(), r0, r0 + rows, 0, w.n_tiles());
        ASSERT_EQ(std::memcmp(want.data() + size_t(r0) * n_out, got.data() + size_t(r0) * n_out,
                              sizeof(float) * size_t(rows) * n_out),
                  0)
            << k->isa << " format " << int(fmt) << " rows [" << r0 << ", " << r0 + rows << ")";
      }
    }
  }
}

// The largest products each format allows (5-bit code 31 or int8 -127 against
// activations of +-127) in every lane: the AVX2 int16 partial sums must not
// overflow anywhere, and every table equals the reference.
TEST(Gemm, ExtremeCodesDoNotOverflow) {
  const KernelTable& ref = scalar_kernels();
  const int rows = 5, n_out = 24, n_in = 128;
  std::vector<float> wf(size_t(n_out) * n_in), x(size_t(rows) * n_in);
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = (i / 7) % 3 == 0 ? -1.0f : 1.0f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 5) % 4 == 0 ? -1.0f : 1.0f;
  QuantizedActs qa;
  qa.resize(rows, n_in);
  ref.quantize_rows(x.data(), 0, rows, n_in, qa);
  for (WeightFormat fmt : kFormats) {
    const PackedMatrix w = pack_matrix(DType::F32, wf.data(), n_out, n_in, fmt);
    std::vector<float> want(size_t(rows) * n_out);
    ref.gemm_tiles(w, qa, want.data(), 0, rows, 0, w.n_tiles());
    // The reference is the exact product of +-1 values (Nl4 has no level
    // at -1 x its largest: its -1s round to -104/113; Fp4 rounds 1/12 to fp16).
    for (int o = 0; o < n_out && fmt != WeightFormat::Nl4; ++o) {
      double exact = 0;
      for (int k = 0; k < n_in; ++k) exact += double(wf[size_t(o) * n_in + k]) * x[size_t(k)];
      ASSERT_NEAR(want[size_t(o)], exact, 1e-3 * n_in) << int(fmt);
    }
    for (const KernelTable* k : fast_tables()) {
      for (int r1 : {1, rows}) {
        std::vector<float> got(size_t(rows) * n_out, 0.0f);
        k->gemm_tiles(w, qa, got.data(), 0, r1, 0, w.n_tiles());
        ASSERT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * size_t(r1) * n_out), 0)
            << k->isa << " format " << int(fmt) << " rows " << r1;
      }
    }
  }
}

TEST(Gemm, QuantizeRowsMatchesScalarBitForBit) {
  const auto tables = fast_tables();
  if (tables.empty()) GTEST_SKIP() << "no fast kernels on this CPU";
  std::mt19937 rng(5);
  for (const int n : {32, 96, 576, 1536}) {
    for (const int rows : {1, 3, 8}) {
      Floats x(rows * n, 3, rng, 3.0f);
      std::memset(x.data(), 0, sizeof(float) * kGroup);  // amax == 0
      if (rows * n >= 2 * kGroup) {
        // amax 127: x * 127/amax is x itself, so the .5 values are exact ties.
        for (int j = 0; j < kGroup; ++j) x.data()[kGroup + j] = j == 0 ? 127.0f : float(j) - 15.5f;
      }
      QuantizedActs want, got;
      want.resize(rows, n);
      got.resize(rows, n);
      scalar_kernels().quantize_rows(x.data(), 0, rows, n, want);
      for (const KernelTable* k : tables) {
        k->quantize_rows(x.data(), 0, rows, n, got);
        const size_t ng = size_t(rows) * n / kGroup;
        ASSERT_EQ(std::memcmp(want.q.data(), got.q.data(), size_t(rows) * n), 0) << k->isa;
        ASSERT_EQ(std::memcmp(want.d.data(), got.d.data(), ng * sizeof(float)), 0) << k->isa;
        ASSERT_EQ(std::memcmp(want.s.data(), got.s.data(), ng * sizeof(float)), 0) << k->isa;
        ASSERT_EQ(std::memcmp(want.isum.data(), got.isum.data(), ng * sizeof(int32_t)), 0)
            << k->isa;
      }
    }
  }
}

// matmul() over the pool (any split of rows and tiles, several outputs in one
// dispatch) gives the scalar single-threaded result exactly.
TEST(Gemm, PooledMatmulMatchesSingleThreadedReference) {
  std::mt19937 rng(9);
  TaskPool pool(3);
  for (const int rows : {1, 5, 16, 61, 130}) {
    const int n_in = rows % 2 ? 1536 : 576;
    const PackedMatrix a = random_matrix(WeightFormat::Int4Asym, 200, n_in, rng);
    const PackedMatrix b = random_matrix(WeightFormat::Int4Asym, 36, n_in, rng);
    const PackedMatrix h = random_matrix(WeightFormat::Int8Sym, 77, n_in, rng);
    const PackedMatrix f = random_matrix(WeightFormat::Int5Sym, 45, n_in, rng);
    const PackedMatrix v = random_matrix(WeightFormat::Int5Asym, 51, n_in, rng);
    Floats x(rows * n_in, 0, rng);
    QuantizedActs qa;
    quantize_activations(x.data(), rows, n_in, qa, pool);
    std::vector<float> ya(size_t(rows) * 200), yb(size_t(rows) * 36), yh(size_t(rows) * 77),
        yf(size_t(rows) * 45), yv(size_t(rows) * 51);
    matmul({{&a, ya.data()}, {&b, yb.data()}, {&f, yf.data()}, {&v, yv.data()}}, qa, pool);
    matmul(h, qa, yh.data(), pool);
    for (const auto& [w, y] : {std::pair{&a, &ya}, {&b, &yb}, {&h, &yh}, {&f, &yf}, {&v, &yv}}) {
      std::vector<float> want(y->size());
      scalar_kernels().gemm_tiles(*w, qa, want.data(), 0, rows, 0, w->n_tiles());
      ASSERT_EQ(std::memcmp(want.data(), y->data(), sizeof(float) * want.size()), 0)
          << "rows " << rows << " n_out " << w->n_out;
    }
  }
}

// One-row (decode) and small-batch matmuls over several outputs: any pool
// size, outputs of one tile, more workers than tiles, give the scalar
// single-threaded result exactly.
TEST(Gemm, DecodeMatmulsMatchReferenceForAnyPoolSize) {
  std::mt19937 rng(13);
  const int n_in = 640;
  const PackedMatrix tiny = random_matrix(WeightFormat::Int8Sym, 8, n_in, rng);  // one tile
  const PackedMatrix a = random_matrix(WeightFormat::Int4Asym, 200, n_in, rng);
  const PackedMatrix f = random_matrix(WeightFormat::Int5Sym, 45, n_in, rng);
  const PackedMatrix v = random_matrix(WeightFormat::Int5Asym, 27, n_in, rng);
  const PackedMatrix h = random_matrix(WeightFormat::Int8Sym, 1003, n_in, rng);
  for (const int threads : {2, 3, 5, 16}) {
    TaskPool pool(threads);
    for (const int rows : {1, 3, 16}) {
      Floats x(rows * n_in, 0, rng);
      QuantizedActs qa;
      quantize_activations(x.data(), rows, n_in, qa, pool);
      std::vector<float> yt(size_t(rows) * 8), ya(size_t(rows) * 200), yf(size_t(rows) * 45),
          yv(size_t(rows) * 27), yh(size_t(rows) * 1003), y1(size_t(rows) * 8);
      for (int rep = 0; rep < 20; ++rep) {  // many dispatches: workers race differently
        matmul({{&tiny, yt.data()}, {&a, ya.data()}, {&f, yf.data()}, {&v, yv.data()}}, qa, pool);
        matmul(h, qa, yh.data(), pool);
        matmul(tiny, qa, y1.data(), pool);  // fewer units than workers
        for (const auto& [w, y] :
             {std::pair{&tiny, &yt}, {&a, &ya}, {&f, &yf}, {&v, &yv}, {&h, &yh}, {&tiny, &y1}}) {
          std::vector<float> want(y->size());
          scalar_kernels().gemm_tiles(*w, qa, want.data(), 0, rows, 0, w->n_tiles());
          ASSERT_EQ(std::memcmp(want.data(), y->data(), sizeof(float) * want.size()), 0)
              << "threads " << threads << " rows " << rows << " n_out " << w->n_out;
        }
      }
    }
  }
}

// Matrices packed into WeightArena slices hold the same bytes as packed into
// their own buffers, in disjoint, 64-byte aligned slices, in order.
TEST(Gemm, ArenaSlicesHoldTheSameBytes) {
  std::mt19937 rng(17);
  std::vector<float> src(size_t(77) * 96);
  for (float& v : src) v = std::normal_distribution<float>(0.0f, 0.1f)(rng);
  const WeightFormat fmts[] = {WeightFormat::Int4Asym, WeightFormat::Int5Sym,
                               WeightFormat::Int5Asym, WeightFormat::Int8Sym, WeightFormat::Nl4};
  size_t total = 0;
  for (WeightFormat fmt : fmts) total += (packed_size(fmt, 77, 96) + 63) / 64 * 64;
  WeightArena arena(total);
  EXPECT_GE(arena.size(), total);
  const uint8_t* prev_end = nullptr;
  for (WeightFormat fmt : fmts) {
    const PackedMatrix own = pack_matrix(DType::F32, src.data(), 77, 96, fmt);
    uint8_t* slice = arena.take(packed_size(fmt, 77, 96));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(slice) % 64, 0u);
    if (prev_end) {
      EXPECT_GE(slice, prev_end);
    }
    const PackedMatrix in = pack_matrix(DType::F32, src.data(), 77, 96, fmt, slice);
    ASSERT_EQ(in.data.data(), slice);
    ASSERT_EQ(in.bytes(), own.bytes());
    EXPECT_EQ(std::memcmp(in.data.data(), own.data.data(), own.bytes()), 0);
    prev_end = slice + in.bytes();
  }
}

// The reference itself against a float computation of the same quantized
// values: the block arithmetic is a faithful W4A8 / W8A8 product.
TEST(Gemm, ReferenceMatchesDequantizedProduct) {
  std::mt19937 rng(11);
  const int rows = 3, n_out = 19, n_in = 96;
  for (WeightFormat fmt : kFormats) {
    const PackedMatrix w = random_matrix(fmt, n_out, n_in, rng);
    const QuantizedActs qa = quantized(scalar_kernels(), rows, n_in, rng);
    std::vector<float> y(size_t(rows) * n_out);
    scalar_kernels().gemm_tiles(w, qa, y.data(), 0, rows, 0, w.n_tiles());
    std::vector<float> wr(static_cast<size_t>(n_in));
    for (int o = 0; o < n_out; ++o) {
      unpack_row(w, o, wr.data());
      for (int r = 0; r < rows; ++r) {
        double want = 0, mag = 0, s_err = 0;
        for (int g = 0; g < n_in / kGroup; ++g) {
          const float d = qa.d[size_t(r) * (n_in / kGroup) + g];
          double w_max = 0, x_abs = 0;
          for (int k = 0; k < kGroup; ++k) {
            const int i = g * kGroup + k;
            const double xq = double(qa.q[size_t(r) * n_in + i]);
            want += double(wr[size_t(i)]) * d * xq;
            mag += std::fabs(double(wr[size_t(i)]) * d * xq);
            w_max = std::max(w_max, std::fabs(double(wr[size_t(i)])));
            x_abs += std::fabs(d * xq);
          }
          // int4 and int5: the minimum's (offset's) term uses s = d * sum q as stored (rounded);
          // a generous bound in case it is ever stored in fp16 (2^-11 relative).
          if (fmt == WeightFormat::Int4Asym || is_int5(fmt))
            s_err += w_max * x_abs * std::ldexp(1.0, -11);
        }
        EXPECT_NEAR(y[size_t(r) * n_out + o], want, 1e-5 * mag + s_err + 1e-6)
            << "o " << o << " r " << r;
      }
    }
  }
}

}  // namespace
}  // namespace tern::kernels
