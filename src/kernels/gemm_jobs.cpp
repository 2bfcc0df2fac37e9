// gemm_jobs: many products (base weights and adapters' low-rank terms) in one
// dispatch; the low-rank up-projection's packing and scalar kernel.
#include "tern/kernels/gemm_jobs.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <thread>
#include <vector>

#include "dispatch.h"
#include "tern/core/task_pool.h"
#include "tern/kernels/ops.h"

namespace tern::kernels {

#ifdef TERN_HAVE_AVX2
namespace avx2 {
// lowrank_avx2.cpp
void low_rank_b_add(const LowRankB& b, LowRankU u, int rows, const int* dst_row, const float* scale,
                    float* y, int t0, int t1);
}  // namespace avx2
#endif

namespace {

// How one job is cut into tasks: row chunks x tile chunks.
struct JobSplit {
  int64_t first_task;
  int row_chunk, row_tasks;
  int tile_chunk, tile_tasks;
};
constexpr int kLowRankRows = 16;  // rows a low-rank task takes

// Consecutive low-rank parts over the same rows: their u tasks.
struct UGroup {
  int64_t first_task;
  size_t p0, p1;  // parts [p0, p1)
};

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
  const int groups = p.n_rank_groups(), pairs = p.rank_pairs();
  p.q = AlignedBuffer<int8_t>(size_t(p.n_tiles()) * pairs * kTileRows * 2);
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
        p.q[((size_t(t) * pairs + k / 2) * kTileRows + i) * 2 + k % 2] = int8_t(v);
      }
    }
  }
  return p;
}

void quantize_low_rank_u(const float* u, int rows, int rank, LowRankU out) {
  for (int r = 0; r < rows; ++r) {
    const float* ur = u + size_t(r) * rank;
    int16_t* q = out.q + size_t(r) * out.stride;
    float amax = 0;
    for (int k = 0; k < rank; ++k) amax = std::max(amax, std::fabs(ur[k]));
    const float id = amax != 0.0f ? 32767.0f / amax : 0.0f;
    out.d[r] = amax / 32767.0f;
    for (int k = 0; k < rank; ++k) {
      q[k] = int16_t(std::clamp(std::nearbyint(ur[k] * id), -32767.0f, 32767.0f));
    }
    for (int k = rank; k < out.stride; ++k) q[k] = 0;
  }
}

void low_rank_b_add_ref(const LowRankB& b, LowRankU u, int rows, const int* dst_row,
                        const float* scale, float* y, int t0, int t1) {
  const int groups = b.n_rank_groups(), pairs = b.rank_pairs();
  for (int t = t0; t < t1; ++t) {
    const int8_t* q = b.q.data() + size_t(t) * pairs * kTileRows * 2;
    const float* d = b.d.data() + size_t(t) * groups * kTileRows;
    for (int r = 0; r < rows; ++r) {
      const int16_t* ur = u.q + size_t(r) * u.stride;
      float* yr = y + size_t(dst_row[r]) * b.n_out;
      for (int i = 0; i < kTileRows && t * kTileRows + i < b.n_out; ++i) {
        float acc = 0;
        for (int g = 0; g < groups; ++g) {
          int32_t sum = 0;
          for (int p = g * kGroup / 2; p < std::min(pairs, (g + 1) * kGroup / 2); ++p) {
            sum += q[(p * kTileRows + i) * 2] * ur[2 * p] +
                   q[(p * kTileRows + i) * 2 + 1] * ur[2 * p + 1];
          }
          acc = std::fma(float(sum), d[g * kTileRows + i], acc);
        }
        yr[t * kTileRows + i] = std::fma(acc, scale[r] * u.d[r], yr[t * kTileRows + i]);
      }
    }
  }
}

void low_rank_b_add(const LowRankB& b, LowRankU u, int rows, const int* dst_row, const float* scale,
                    float* y, int t0, int t1) {
#ifdef TERN_HAVE_AVX2
  if (active_isa_family() == IsaFamily::Avx2) {
    avx2::low_rank_b_add(b, u, rows, dst_row, scale, y, t0, t1);
    return;
  }
#endif
  low_rank_b_add_ref(b, u, rows, dst_row, scale, y, t0, t1);
}

void gemm_jobs(std::span<const GemmJob> jobs, const QuantizedActs* lx,
               std::span<const LowRankPart> parts, TaskPool& pool) {
  // Grow once per calling thread; no allocation per step. Workers see them
  // through these references (a lambda does not capture a thread_local).
  thread_local std::vector<JobSplit> splits;
  thread_local std::vector<UGroup> u_groups;
  std::vector<JobSplit>& split = splits;
  std::vector<UGroup>& u_group = u_groups;
  // Tasks [0, n_u): u = A lx for a run of consecutive parts over the same
  // rows (an adapter's q, k and v), 16 rows a task; then the base tasks.
  u_group.clear();
  int64_t n_u = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const LowRankPart& p = parts[i];
    assert(p.a->n_in == lx->n_in && p.a->n_out == p.b->rank && p.r1 <= lx->rows);
    assert(p.b->n_out == jobs[size_t(p.job)].w->n_out);
    assert(p.uq.stride == 2 * p.b->rank_pairs());
    if (i > 0 && p.r0 == parts[i - 1].r0 && p.r1 == parts[i - 1].r1) {
      u_group.back().p1 = i + 1;
      continue;
    }
    const int row_tasks = (p.r1 - p.r0 + kLowRankRows - 1) / kLowRankRows;
    u_group.push_back({n_u, i, i + 1});
    n_u += row_tasks;
  }
  const int64_t n_gemm = split_jobs(jobs, pool.size(), split);
  // With parts, one more task a worker at the end: the epilogues of base
  // tasks that had to put theirs off (below), base task e in sweeper e % n_sweep.
  const int64_t n_sweep = parts.empty() ? 0 : std::min<int64_t>(pool.size(), n_gemm);
  const int64_t n_tasks = n_u + n_gemm + n_sweep;
  thread_local std::vector<int> states;  // per base task: 0 running, 1 done, 2 epilogue put off
  std::vector<int>& state = states;
  state.assign(size_t(n_gemm), 0);
  std::atomic<int64_t> u_done{0};
  const KernelTable& k = active_kernels();
  auto u_task = [&](int64_t t) {
    const UGroup& grp = u_group[job_of(u_group, t)];
    for (size_t i = grp.p0; i < grp.p1; ++i) {
      const LowRankPart& p = parts[i];
      const int r0 = p.r0 + int(t - grp.first_task) * kLowRankRows;
      const int r1 = std::min(p.r1, r0 + kLowRankRows), rank = p.b->rank;
      k.gemm_tiles(*p.a, *lx, p.u, r0, r1, 0, p.a->n_tiles());
      quantize_low_rank_u(p.u + size_t(r0) * rank, r1 - r0, rank,
                          {p.uq.q + size_t(r0) * p.uq.stride, p.uq.d + r0, p.uq.stride});
    }
    u_done.fetch_add(1, std::memory_order_release);
  };
  // Base task e: its job, rows [r0, r1) and tiles [t0, t1).
  struct Piece {
    size_t i;
    int r0, r1, t0, t1;
  };
  auto piece = [&](int64_t e) {
    const size_t i = job_of(split, e);
    const GemmJob& j = jobs[i];
    const JobSplit& s = split[i];
    const int64_t local = e - s.first_task;
    const int rt = int(local / s.tile_tasks), tt = int(local % s.tile_tasks);
    const int r0 = j.r0 + rt * s.row_chunk, t0 = tt * s.tile_chunk;
    return Piece{i, r0, std::min(j.r1, r0 + s.row_chunk), t0,
                 std::min(j.w->n_tiles(), t0 + s.tile_chunk)};
  };
  // The parts' terms on a piece of job i's y.
  auto epilogue = [&](const Piece& c) {
    for (const LowRankPart& p : parts) {
      if (size_t(p.job) != c.i) continue;
      // Its rows that land in [r0, r1): a contiguous run, dst_row increasing.
      const int* lo = std::lower_bound(p.dst_row + p.r0, p.dst_row + p.r1, c.r0);
      const int* hi = std::lower_bound(lo, p.dst_row + p.r1, c.r1);
      if (lo == hi) continue;
      const int g = int(lo - p.dst_row);
      const LowRankU u{p.uq.q + size_t(g) * p.uq.stride, p.uq.d + g, p.uq.stride};
      low_rank_b_add(*p.b, u, int(hi - lo), lo, p.scale + g, jobs[c.i].y, c.t0, c.t1);
    }
  };
  // Spins (then yields: the thread it waits on may be descheduled) until ready().
  auto wait_for = [](auto ready) {
    for (int spin = 0; !ready(); ++spin) {
      if (spin > 64) std::this_thread::yield();
    }
  };
  auto task = [&](int64_t t) {
    if (t < n_u) {
      u_task(t);
      return;
    }
    if (t < n_u + n_gemm) {
      // The base tiles, then the adapters' terms on them if every u is ready
      // (nearly always: the u tasks are small and were handed out first);
      // otherwise a sweeper does them, so this thread never waits here
      // while other base tasks are left.
      const int64_t e = t - n_u;
      const Piece c = piece(e);
      k.gemm_tiles(*jobs[c.i].w, *jobs[c.i].x, jobs[c.i].y, c.r0, c.r1, c.t0, c.t1);
      int done = 1;
      if (!parts.empty()) {
        if (u_done.load(std::memory_order_acquire) == n_u) {
          epilogue(c);
        } else {
          done = 2;
        }
      }
      std::atomic_ref<int>(state[size_t(e)]).store(done, std::memory_order_release);
      return;
    }
    // A sweeper: handed out after every base task, so its waits are those
    // of a join.
    for (int64_t e = t - n_u - n_gemm; e < n_gemm; e += n_sweep) {
      std::atomic_ref<int> st(state[size_t(e)]);
      wait_for([&] { return st.load(std::memory_order_acquire) != 0; });
      if (st.load(std::memory_order_relaxed) != 2) continue;
      wait_for([&] { return u_done.load(std::memory_order_acquire) == n_u; });
      epilogue(piece(e));
    }
  };
  if (n_tasks == 1) {
    task(0);
  } else if (n_tasks > 1) {
    pool.run(n_tasks, [&](int64_t t, int) { task(t); });
  }
}

}  // namespace tern::kernels
