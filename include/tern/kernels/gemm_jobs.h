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

// The up-projection B (n_out, rank) of a low-rank product y += s B u. B is
// int8 with an fp32 scale per output row and group of 32 along the rank:
// b = d q, d = amax / 127 of the group, so |b - d q| <= amax / 254; u is
// int16 per row (LowRankU: |du| <= amax(u) / 65534, far below B's and A's
// int8 steps). The rank is NOT padded to a group: a rank-16 B is 16 bytes a
// row plus its scale (only an odd rank gets one zero column). Tiles of
// kTileRows outputs; inside a tile, for each pair of inputs (2p, 2p + 1),
// the 8 outputs' two values side by side (16 bytes): one sign-extension to
// int16 and one vpmaddwd against the broadcast pair of u give the 8
// outputs' partial sums in 8 int32 lanes (exact: a group's sum is below
// 32 * 127 * 32767 < 2^31), no horizontal sums.
struct LowRankB {
  int n_out = 0, rank = 0;
  AlignedBuffer<int8_t> q;  // (n_tiles, rank_pairs, kTileRows, 2); padding is 0
  AlignedBuffer<float> d;   // (n_tiles, n_rank_groups, kTileRows)
  int n_tiles() const { return (n_out + kTileRows - 1) / kTileRows; }
  int rank_pairs() const { return (rank + 1) / 2; }
  int n_rank_groups() const { return (rank + kGroup - 1) / kGroup; }
  size_t bytes() const { return q.size() + d.size() * sizeof(float); }
};
// b: (n_out, rank) row-major fp32.
LowRankB pack_low_rank_b(const float* b, int n_out, int rank);

// Rows of u for LowRankB: int16 values, rows 2 * rank_pairs wide (an odd
// rank's last column 0), and a scale per row.
struct LowRankU {
  int16_t* q;  // (rows, stride)
  float* d;    // (rows)
  int stride;
};
// u (rows, rank) fp32 -> rows [0, rows) of out: d = amax / 32767, q = u / d rounded.
void quantize_low_rank_u(const float* u, int rows, int rank, LowRankU out);

// y[dst_row[r]][o] += scale[r] * sum_k B[o][k] u[r][k] for rows r < rows and
// the outputs o of tiles [t0, t1), y rows b.n_out wide. The scalar twin, and
// the dispatched kernel (AVX2 when the active kernel table is an x86 one):
// bit-identical (exact int32 sums per group; acc = fma(float(sum), d, acc)
// in group order; y = fma(acc, scale * u.d, y)).
void low_rank_b_add_ref(const LowRankB& b, LowRankU u, int rows, const int* dst_row,
                        const float* scale, float* y, int t0, int t1);
void low_rank_b_add(const LowRankB& b, LowRankU u, int rows, const int* dst_row, const float* scale,
                    float* y, int t0, int t1);

// One adapter's term on the output of one GemmJob: y[dst_row[r]] +=
// scale[r] * B (A lx[r]) for rows r0 <= r < r1 of the low-rank input lx
// (A: (rank, n_in) Int8Sym, run by the tile kernels on lx's int8 rows).
struct LowRankPart {
  int job = 0;  // the GemmJob whose y it adds to (B's n_out = its W's)
  const PackedMatrix* a = nullptr;
  const LowRankB* b = nullptr;
  int r0 = 0, r1 = 0;
  float* u = nullptr;            // (lx rows, rank) scratch: A lx, rows [r0, r1) written
  LowRankU uq{};                 // (lx rows) scratch: u as int16, rows [r0, r1) written
  const int* dst_row = nullptr;  // (lx rows) the y row of each lx row; increasing in [r0, r1)
  const float* scale = nullptr;  // (lx rows)
};

// Runs every job in ONE dispatch (one join). GemmJobs are split over output
// tiles (and over rows when a job has many) into about 8 tasks a worker,
// weighted by work. With low-rank parts, the dispatch first has one task per
// part and 16 of its rows computing u = A lx (then int16); each base task
// then, after its tiles, adds every part's scaled B u for those same tiles
// and rows (so B is read once, spread over the base's compute-bound tasks,
// and y is never written by two tasks at once). The pool hands tasks out in
// index order, so when a base task ends every u task has been handed out;
// if one is still running, the base task does not wait but leaves its
// epilogue to one of the trailing sweeper tasks (one a worker), which wait
// only as a join would. Per output value the arithmetic is that of matmul() then
// low_rank_b_add() in part order: the same numbers whatever the split.
void gemm_jobs(std::span<const GemmJob> jobs, const QuantizedActs* lx,
               std::span<const LowRankPart> parts, TaskPool& pool);

}  // namespace tern::kernels
