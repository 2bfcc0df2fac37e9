#pragma once
// Several matrix products over row ranges of quantized inputs, in ONE
// dispatch on the task pool (one join for all of them): a base weight over
// every row of a batch and small adapter matrices over a few rows each share
// the pool's tail instead of paying a join apiece.
#include <span>

#include "tern/kernels/packed.h"

namespace tern {
class TaskPool;
}

namespace tern::kernels {

// y[r][o] = x[r] . W[o] for rows r0 <= r < r1 of x and every output o of W;
// y (x->rows, w->n_out) row-major, only rows [r0, r1) touched.
// With `add` set, each computed row is then also accumulated into another
// matrix: add[add_row[r - r0]][o] += add_scale[r - r0] * y[r][o], rows of
// add being w->n_out wide (the epilogue of an adapter's up-projection: y is
// scratch, add the layer's output, add_row the batch row of each input row),
// or interleaved (below).
// Distinct jobs must not write the same y or add elements.
struct GemmJob {
  const PackedMatrix* w = nullptr;
  const QuantizedActs* x = nullptr;
  int r0 = 0, r1 = 0;
  float* y = nullptr;
  float* add = nullptr;
  const int* add_row = nullptr;      // (r1 - r0)
  const float* add_scale = nullptr;  // (r1 - r0)
  // add_interleave k > 1: row r's output o goes to add column o * k + (r -
  // r0) % k (k rows of x make one row of add; columns past add_n dropped).
  int add_interleave = 1;
  int add_n = 0;  // add's row width; 0: w->n_out
};

// Runs every job, split over output tiles (and over rows when a job has many)
// into about 8 tasks a worker, weighted by work. Per output value the
// arithmetic is that of matmul(): the same numbers whatever the split.
void gemm_jobs(std::span<const GemmJob> jobs, TaskPool& pool);

}  // namespace tern::kernels
