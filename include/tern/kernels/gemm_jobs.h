#pragma once
// Several matrix products over row ranges of quantized inputs, in ONE
// dispatch on the task pool (one join for all of them): the base weights
// over every row of a batch and the adapters' low-rank products over a few
// rows each share the pool's tail instead of paying a join apiece.
#include <span>

#include "tern/core/aligned.h"
#include "tern/kernels/packed.h"

namespace tern {
class TaskPool;
}

namespace tern::kernels {

// y[r][o] = x[r] . W[o] for rows r0 <= r < r1 of x and every output o of W;
// y (x->rows, w->n_out) row-major, only rows [r0, r1) touched.
struct GemmJob {
  const PackedMatrix* w = nullptr;
  const QuantizedActs* x = nullptr;
  int r0 = 0, r1 = 0;
  float* y = nullptr;
};

// The up-projection B (n_out, rank) of a low-rank product, applied to fp32
// inputs (u is never requantized). int8 values with an fp32 scale per output
// row and group of 32 along the rank: b = d * q, d = amax / 127 of the
// group, so |b - d q| <= amax / 254. The rank is NOT padded to a group (a
// rank-16 B is 16 bytes a row, plus its scale). Tiles of kTileRows outputs,
// k-major inside a tile: the tile's 8 values of input k are 8 adjacent
// bytes, which widen straight into the 8 lanes of one accumulator.
struct LowRankB {
  int n_out = 0, rank = 0;
  AlignedBuffer<int8_t> q;  // (n_tiles, rank, kTileRows); rows past n_out are 0
  AlignedBuffer<float> d;   // (n_tiles, n_rank_groups, kTileRows)
  int n_tiles() const { return (n_out + kTileRows - 1) / kTileRows; }
  int n_rank_groups() const { return (rank + kGroup - 1) / kGroup; }
  size_t bytes() const { return q.size() + d.size() * sizeof(float); }
};
// b: (n_out, rank) row-major fp32.
LowRankB pack_low_rank_b(const float* b, int n_out, int rank);
// z[r][o] = sum_k B[o][k] u[r][k] for rows r < rows: u (rows, u_stride),
// z (rows, b.n_out). The scalar twin, and the dispatched kernel (AVX2 when
// the active kernel table is an x86 one); both accumulate each group of 32
// in fp32 and scale it, in a different order.
void low_rank_b_ref(const LowRankB& b, const float* u, int u_stride, int rows, float* z);
void low_rank_b(const LowRankB& b, const float* u, int u_stride, int rows, float* z);

// A low-rank product over rows [r0, r1) of x: u = A x (A: (rank, n_in),
// Int8Sym, on the tile kernels from x's int8 rows), then z = B u in fp32.
// u (x->rows, a->n_out) is scratch, rows [r0, r1) written; z (r1 - r0,
// b->n_out). One task computes both, so they need no join in between.
struct LowRankJob {
  const PackedMatrix* a = nullptr;
  const LowRankB* b = nullptr;
  const QuantizedActs* x = nullptr;
  int r0 = 0, r1 = 0;
  float* u = nullptr;
  float* z = nullptr;
};

// Runs every job in one dispatch. GemmJobs are split over output tiles (and
// over rows when a job has many) into about 8 tasks a worker, weighted by
// work; low-rank jobs are one task per 16 rows, interleaved evenly among
// them so that a core streaming adapter bytes overlaps one computing the
// base. Per output value the arithmetic is that of matmul() (and of
// low_rank_b for z): the same numbers whatever the split.
void gemm_jobs(std::span<const GemmJob> jobs, std::span<const LowRankJob> low_rank, TaskPool& pool);

}  // namespace tern::kernels
