// gemm_jobs: many products (base weights and adapters' low-rank terms) in one
// dispatch; the low-rank up-projection's packing and scalar kernel.
#include "tern/kernels/gemm_jobs.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "dispatch.h"
#include "tern/core/task_pool.h"
#include "tern/kernels/ops.h"

namespace tern::kernels {

#ifdef TERN_HAVE_AVX2
namespace avx2 {
void low_rank_b(const LowRankB& b, const float* u, int u_stride, int rows,
                float* z);  // lowrank_avx2.cpp
}
#endif

namespace {

// How one job is cut into tasks: row chunks x tile chunks.
struct JobSplit {
  int64_t first_task;
  int row_chunk, row_tasks;
  int tile_chunk, tile_tasks;
};
constexpr int kLowRankRows = 16;  // rows a low-rank task takes

// Splits every GemmJob into tasks of about equal work; returns their count.
int64_t split_jobs(std::span<const GemmJob> jobs, int n_workers, std::vector<JobSplit>& split) {
  split.resize(jobs.size());
  double total = 0;  // work in (row x tile x group) units
  for (const GemmJob& j : jobs) {
    assert(j.w->n_in == j.x->n_in && j.r0 >= 0 && j.r1 <= j.x->rows);
    total += double(j.r1 - j.r0) * j.w->n_tiles() * j.w->n_groups();
  }
  const int want_tasks = n_workers == 1 ? 1 : n_workers * 8;
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
  return n_tasks;
}

// The job a task number belongs to (splits sorted by first_task).
template <typename S>
size_t job_of(const std::vector<S>& split, int64_t t) {
  return size_t(std::upper_bound(split.begin(), split.end(), t,
                                 [](int64_t v, const S& s) { return v < s.first_task; }) -
                split.begin()) -
         1;
}

}  // namespace

LowRankB pack_low_rank_b(const float* b, int n_out, int rank) {
  LowRankB p;
  p.n_out = n_out;
  p.rank = rank;
  const int groups = p.n_rank_groups();
  p.q = AlignedBuffer<int8_t>(size_t(p.n_tiles()) * rank * kTileRows);
  p.d = AlignedBuffer<float>(size_t(p.n_tiles()) * groups * kTileRows);
  for (int o = 0; o < n_out; ++o) {
    const int t = o / kTileRows, i = o % kTileRows;
    const float* row = b + size_t(o) * rank;
    for (int g = 0; g < groups; ++g) {
      const int k0 = g * kGroup, k1 = std::min(rank, k0 + kGroup);
      float amax = 0;
      for (int k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(row[k]));
      const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
      p.d[(size_t(t) * groups + g) * kTileRows + i] = d;
      for (int k = k0; k < k1; ++k) {
        const float v = std::clamp(std::nearbyint(row[k] * id), -127.0f, 127.0f);
        p.q[(size_t(t) * rank + k) * kTileRows + i] = int8_t(v);
      }
    }
  }
  return p;
}

void low_rank_b_ref(const LowRankB& b, const float* u, int u_stride, int rows, float* z) {
  const int groups = b.n_rank_groups();
  for (int t = 0; t < b.n_tiles(); ++t) {
    const int8_t* q = b.q.data() + size_t(t) * b.rank * kTileRows;
    const float* d = b.d.data() + size_t(t) * groups * kTileRows;
    for (int r = 0; r < rows; ++r) {
      const float* ur = u + size_t(r) * u_stride;
      for (int i = 0; i < kTileRows && t * kTileRows + i < b.n_out; ++i) {
        float acc = 0;
        for (int g = 0; g < groups; ++g) {
          float s = 0;
          for (int k = g * kGroup; k < std::min(b.rank, (g + 1) * kGroup); ++k) {
            s = std::fma(float(q[k * kTileRows + i]), ur[k], s);
          }
          acc = std::fma(s, d[g * kTileRows + i], acc);
        }
        z[size_t(r) * b.n_out + t * kTileRows + i] = acc;
      }
    }
  }
}

void low_rank_b(const LowRankB& b, const float* u, int u_stride, int rows, float* z) {
#ifdef TERN_HAVE_AVX2
  if (active_isa_family() == IsaFamily::Avx2) {
    avx2::low_rank_b(b, u, u_stride, rows, z);
    return;
  }
#endif
  low_rank_b_ref(b, u, u_stride, rows, z);
}

void gemm_jobs(std::span<const GemmJob> jobs, std::span<const LowRankJob> low_rank,
               TaskPool& pool) {
  // Grow once per calling thread; no allocation per step. Workers see them
  // through these references (a lambda does not capture a thread_local).
  thread_local std::vector<JobSplit> splits;
  thread_local std::vector<JobSplit> lr_splits;  // row_chunk = kLowRankRows, no tile split
  thread_local std::vector<int64_t> orders;      // task -> gemm task, or ~low-rank task
  std::vector<JobSplit>& split = splits;
  std::vector<JobSplit>& lr_split = lr_splits;
  std::vector<int64_t>& order = orders;
  const int64_t n_gemm = split_jobs(jobs, pool.size(), split);
  lr_split.resize(low_rank.size());
  int64_t n_lr = 0;
  for (size_t i = 0; i < low_rank.size(); ++i) {
    const LowRankJob& j = low_rank[i];
    assert(j.a->n_in == j.x->n_in && j.a->n_out == j.b->rank && j.r1 <= j.x->rows);
    lr_split[i] = {n_lr, kLowRankRows, (j.r1 - j.r0 + kLowRankRows - 1) / kLowRankRows, 1, 1};
    n_lr += lr_split[i].row_tasks;
  }
  // Low-rank task i goes at position about (i + 1/2) * n / n_lr.
  const int64_t n_tasks = n_gemm + n_lr;
  order.resize(size_t(n_tasks));
  for (int64_t t = 0, g = 0, l = 0; t < n_tasks; ++t) {
    const bool lr = l < n_lr && (g == n_gemm || (2 * l + 1) * n_tasks <= 2 * t * n_lr + n_lr);
    order[size_t(t)] = lr ? ~l++ : g++;
  }
  const KernelTable& k = active_kernels();
  auto gemm_task = [&](int64_t t) {
    const size_t i = job_of(split, t);
    const GemmJob& j = jobs[i];
    const JobSplit& s = split[i];
    const int64_t local = t - s.first_task;
    const int rt = int(local / s.tile_tasks), tt = int(local % s.tile_tasks);
    const int r0 = j.r0 + rt * s.row_chunk, r1 = std::min(j.r1, r0 + s.row_chunk);
    const int t0 = tt * s.tile_chunk, t1 = std::min(j.w->n_tiles(), t0 + s.tile_chunk);
    k.gemm_tiles(*j.w, *j.x, j.y, r0, r1, t0, t1);
  };
  auto low_rank_task = [&](int64_t t) {
    const size_t i = job_of(lr_split, t);
    const LowRankJob& j = low_rank[i];
    const int r0 = j.r0 + int(t - lr_split[i].first_task) * kLowRankRows;
    const int r1 = std::min(j.r1, r0 + kLowRankRows), rank = j.b->rank;
    k.gemm_tiles(*j.a, *j.x, j.u, r0, r1, 0, j.a->n_tiles());
    low_rank_b(*j.b, j.u + size_t(r0) * rank, rank, r1 - r0, j.z + size_t(r0 - j.r0) * j.b->n_out);
  };
  auto task = [&](int64_t t) {
    const int64_t o = order[size_t(t)];
    if (o >= 0) {
      gemm_task(o);
    } else {
      low_rank_task(~o);
    }
  };
  if (n_tasks == 1) {
    task(0);
  } else if (n_tasks > 1) {
    pool.run(n_tasks, [&](int64_t t, int) { task(t); });
  }
}

}  // namespace tern::kernels
