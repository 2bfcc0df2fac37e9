// gemm_jobs: many products (base weights and adapter matrices) in one dispatch.
#include "tern/kernels/gemm_jobs.h"

#include <algorithm>
#include <cassert>
#include <vector>

#include "dispatch.h"
#include "tern/core/task_pool.h"

namespace tern::kernels {
namespace {

// How one job is cut into tasks: row chunks x tile chunks.
struct JobSplit {
  int64_t first_task;
  int row_chunk, row_tasks;
  int tile_chunk, tile_tasks;
};

}  // namespace

void gemm_jobs(std::span<const GemmJob> jobs, TaskPool& pool) {
  if (jobs.empty()) return;
  // Grows once per calling thread; no allocation per step. Workers see it
  // through this reference (a lambda does not capture a thread_local).
  thread_local std::vector<JobSplit> splits;
  std::vector<JobSplit>& split = splits;
  split.resize(jobs.size());
  double total = 0;  // work in (row x tile x group) units
  for (const GemmJob& j : jobs) {
    assert(j.w->n_in == j.x->n_in && j.r0 >= 0 && j.r1 <= j.x->rows);
    total += double(j.r1 - j.r0) * j.w->n_tiles() * j.w->n_groups();
  }
  const int want_tasks = pool.size() == 1 ? 1 : pool.size() * 8;
  const double per_task = std::max(1.0, total / want_tasks);
  int64_t n_tasks = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const GemmJob& j = jobs[i];
    JobSplit& s = split[i];
    const int rows = j.r1 - j.r0, tiles = j.w->n_tiles();
    s.first_task = n_tasks;
    s.row_chunk = std::max(1, row_chunk_for(rows, j.w->n_in));
    s.row_tasks = rows > 0 ? (rows + s.row_chunk - 1) / s.row_chunk : 0;
    const double tile_work = double(s.row_chunk) * j.w->n_groups();
    s.tile_chunk = std::clamp(int(per_task / tile_work), 1, std::max(1, tiles));
    s.tile_tasks = (tiles + s.tile_chunk - 1) / s.tile_chunk;
    n_tasks += int64_t(s.row_tasks) * s.tile_tasks;
  }
  const KernelTable& k = active_kernels();
  auto task = [&](int64_t t) {
    const size_t i =
        size_t(std::upper_bound(split.begin(), split.end(), t,
                                [](int64_t v, const JobSplit& s) { return v < s.first_task; }) -
               split.begin()) -
        1;
    const GemmJob& j = jobs[i];
    const JobSplit& s = split[i];
    const int64_t local = t - s.first_task;
    const int rt = int(local / s.tile_tasks), tt = int(local % s.tile_tasks);
    const int r0 = j.r0 + rt * s.row_chunk, r1 = std::min(j.r1, r0 + s.row_chunk);
    const int t0 = tt * s.tile_chunk, t1 = std::min(j.w->n_tiles(), t0 + s.tile_chunk);
    k.gemm_tiles(*j.w, *j.x, j.y, r0, r1, t0, t1);
    if (!j.add) return;
    const int n = j.w->n_out, o0 = t0 * kTileRows, o1 = std::min(n, t1 * kTileRows);
    const int k = j.add_interleave, an = j.add_n > 0 ? j.add_n : n;
    if (k == 2 && (r0 - j.r0) % 2 == 0 && (r1 - r0) % 2 == 0) {
      // Two rows make one row of add: interleave them in one pass (row
      // chunks are whole micro-kernels, so a pair is never split).
      const int o_pair = std::min(o1, an / 2);
      for (int r = r0; r < r1; r += 2) {
        const float* y0 = j.y + size_t(r) * n;
        const float* y1 = y0 + n;
        float* dst = j.add + size_t(j.add_row[r - j.r0]) * an;
        const float s0 = j.add_scale[r - j.r0], s1 = j.add_scale[r + 1 - j.r0];
        for (int o = o0; o < o_pair; ++o) {
          dst[2 * o] += s0 * y0[o];
          dst[2 * o + 1] += s1 * y1[o];
        }
        if (o_pair < o1 && 2 * o_pair < an) dst[2 * o_pair] += s0 * y0[o_pair];  // odd width
      }
      return;
    }
    for (int r = r0; r < r1; ++r) {
      const float* yr = j.y + size_t(r) * n;
      float* dst = j.add + size_t(j.add_row[r - j.r0]) * an;
      const float sc = j.add_scale[r - j.r0];
      if (k == 1) {
        for (int o = o0; o < o1; ++o) dst[o] += sc * yr[o];
      } else {
        const int h = (r - j.r0) % k;
        for (int o = o0; o < o1 && o * k + h < an; ++o) dst[o * k + h] += sc * yr[o];
      }
    }
  };
  if (n_tasks == 1) {
    task(0);
    return;
  }
  pool.run(n_tasks, [&](int64_t t, int) { task(t); });
}

}  // namespace tern::kernels
