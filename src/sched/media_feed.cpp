#include "media_feed.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "sched_log.h"
#include "sequence.h"
#include "tern/core/memory_budget.h"

namespace tern::sched {
namespace {

const char* kind(const vision::MediaSpan& m) {
  return m.audio ? "audio clip" : "image";
}

}  // namespace

size_t MediaFeed::bytes(const Request& r) const {
  std::vector<std::pair<Sha256Digest, int64_t>> rows;  // (picture, rows it needs)
  for (const vision::MediaSpan& m : r.media) {
    auto it =
        std::find_if(rows.begin(), rows.end(), [&](const auto& x) { return x.first == m.hash; });
    if (it == rows.end()) it = rows.insert(rows.end(), {m.hash, 0});
    it->second = std::max<int64_t>(it->second, int64_t(m.row0) + m.n);
  }
  size_t n = 0;
  for (const auto& [h, k] : rows) n += size_t(k) * size_t(d_model_) * sizeof(float);
  return n;
}

bool MediaFeed::reserve(Request& r, bool alone) {
  const size_t n = bytes(r);
  if (!budget_ || n == 0) return true;
  // The KV gives back only unreferenced cached blocks: running sequences'
  // KV is never evicted for embeddings.
  if (!budget_->charge(MemPool::MmRequests, n, {MemPool::MmCache, MemPool::Kv})) {
    if (!alone) return false;
    // Nothing else runs, yet no room: what holds it is a preempted request's
    // reservation. Run anyway (it fit the budget at submit) rather than wait forever.
    logger()->warn("[{}] memory budget: {} bytes of image rows admitted past the budget", r.id, n);
    budget_->force_charge(MemPool::MmRequests, n);
  }
  r.media_charge = std::make_shared<MemoryCharge>(budget_, MemPool::MmRequests, n);
  return true;
}

int MediaFeed::ready(Sequence& s, int n) {
  const int lo = s.in_kv;
  for (size_t i = 0; i < s.req.media.size(); ++i) {
    const vision::MediaSpan& m = s.req.media[i];
    if (m.pos >= lo + n) break;
    if (m.pos + m.n <= lo) continue;
    if (!span_ready(s, i)) return std::max(0, m.pos - lo);
  }
  return n;
}

// Span i's rows are at hand when kept (any span of the same picture), from a
// finished encode it waited for, or in the cache. Otherwise s joins the
// encode under way for the same picture or starts one; a source that cannot
// encode in slices counts as ready (rows() fetches from it, blocking).
bool MediaFeed::span_ready(Sequence& s, size_t i) {
  auto& rows = s.media.rows;
  auto& waits = s.media.waits;
  const vision::MediaSpan& m = s.req.media[i];
  for (size_t j = 0; j < rows.size() && !rows[i] && !waits[i]; ++j) {
    if (j == i || s.req.media[j].hash != m.hash) continue;
    rows[i] = rows[j];
    waits[i] = waits[j];
  }
  if (rows[i]) return true;
  if (!waits[i]) {
    MediaCounts& t = s.media.counts(m);
    if ((waits[i] = find(m))) {  // another prompt's encode of the same picture
      t.fetched += 1;
      t.cache_hits += 1;
      metrics_.vision_encodes_shared += 1;
    } else if ((rows[i] = m.source->cached(m.hash))) {
      t.fetched += 1;
      t.cache_hits += 1;
      return true;
    } else if ((waits[i] = start(m, s.order))) {
      t.fetched += 1;
    } else {
      return true;  // rows() fetches it now
    }
  }
  const MediaEncode& w = *waits[i];
  if (!w.finished()) return false;
  if (!w.error.empty()) throw InvalidArgument(w.error);
  if (w.starter == s.order) s.media.counts(m).fetch_ms += w.busy_ms;
  for (size_t j = 0; j < rows.size(); ++j) {  // every span of this picture
    if (waits[j].get() != &w) continue;
    rows[j] = w.rows;
    if (j != i) waits[j].reset();
  }
  waits[i].reset();
  return true;
}

int MediaFeed::fit_chunk(const Sequence& s, int n) {
  const int lo = s.in_kv;
  for (const vision::MediaSpan& m : s.req.media) {
    const int end = m.pos + m.n;
    if (!m.bidirectional || lo + n <= m.pos || lo + n >= end) continue;
    n = lo < m.pos ? m.pos - lo : end - lo;
  }
  return n;
}

const vision::Embeddings& MediaFeed::rows(Sequence& s, size_t i) {
  auto& rows = s.media.rows;
  const vision::MediaSpan& m = s.req.media[i];
  if (!rows[i]) {
    for (size_t j = 0; j < rows.size() && !rows[i]; ++j)
      if (rows[j] && s.req.media[j].hash == m.hash) rows[i] = rows[j];
  }
  if (!rows[i]) {
    const auto t0 = Clock::now();
    vision::EmbeddingSource::Fetched f = m.source->fetch_span(m);
    MediaCounts& t = s.media.counts(m);
    t.fetch_ms += ms_between(t0, Clock::now());
    t.fetched += 1;
    t.cache_hits += f.cached ? 1 : 0;
    rows[i] = std::move(f.rows);
    if (!rows[i])
      throw InvalidArgument(std::string("the ") + kind(m) + "'s embedding rows are missing");
  }
  const vision::Embeddings& e = *rows[i];
  if (e.n_embd != d_model_)
    throw InvalidArgument(std::string(kind(m)) + " embeddings are " + std::to_string(e.n_embd) +
                          " wide but the text model's embedding width is " +
                          std::to_string(d_model_));
  if (int64_t(m.row0) + m.n > e.n_tokens || e.data.size() < size_t(e.n_tokens) * size_t(d_model_))
    throw InvalidArgument(std::string("the ") + kind(m) + " has " + std::to_string(e.n_tokens) +
                          " embedding rows, fewer than its place in the prompt needs");
  return e;
}

void MediaFeed::runs(Sequence& s, int n, std::vector<EmbeddingRun>& runs) {
  const int lo = s.in_kv, hi = s.in_kv + n;
  for (size_t i = 0; i < s.req.media.size(); ++i) {
    const vision::MediaSpan& m = s.req.media[i];
    const int a = std::max(lo, int(m.pos)), b = std::min(hi, int(m.pos + m.n));
    if (a >= b) continue;
    const vision::Embeddings& e = rows(s, i);
    runs.push_back({a - lo, b - a, e.data.data() + size_t(m.row0 + (a - m.pos)) * size_t(d_model_),
                    m.bidirectional});
  }
}

void MediaFeed::release_passed(Sequence& s) {
  for (size_t i = 0; i < s.media.rows.size(); ++i) {
    if (!s.media.rows[i]) continue;
    bool needed = false;
    for (const vision::MediaSpan& m : s.req.media)
      needed |= m.hash == s.req.media[i].hash && m.pos + m.n > s.in_kv;
    if (!needed) s.media.rows[i].reset();
  }
  // Past every span: its reservation in the memory budget ends.
  if (s.in_kv >= s.req.media.back().pos + s.req.media.back().n) s.req.media_charge.reset();
}

std::shared_ptr<MediaEncode> MediaFeed::find(const vision::MediaSpan& m) const {
  for (const auto& w : encodes_)
    if (w->source == m.source.get() && w->hash == m.hash) return w;
  return nullptr;
}

std::shared_ptr<MediaEncode> MediaFeed::start(const vision::MediaSpan& m, uint64_t starter) {
  std::unique_ptr<vision::MediaJob> job = m.source->start_job(m);
  if (!job) return nullptr;
  if (ms_per_gflop_ > 0) job->set_ms_per_gflop(ms_per_gflop_);
  auto w = std::make_shared<MediaEncode>();
  w->source = m.source.get();
  w->hash = m.hash;
  w->kind = m.audio ? "audio" : "image";
  w->starter = starter;
  w->job = std::move(job);
  encodes_.push_back(w);
  metrics_.vision_encodes += 1;
  return w;
}

void MediaFeed::drop_unwaited() {
  for (auto it = encodes_.begin(); it != encodes_.end();) {
    if (it->use_count() > 1) {  // a sequence still holds it
      ++it;
      continue;
    }
    logger()->info("{} encode dropped after {} of {} stages: nobody waits for it", (*it)->kind,
                   (*it)->job->stages_done(), (*it)->job->stages_total());
    metrics_.vision_encodes_dropped += 1;
    it = encodes_.erase(it);
  }
}

void MediaFeed::advance(TaskPool& pool, double budget_ms) {
  drop_unwaited();
  const auto t0 = Clock::now();
  double left = budget_ms;
  while (!encodes_.empty()) {
    MediaEncode& w = *encodes_.front();
    const int slices = w.job->slices();
    try {
      w.job->advance(pool, left);
    } catch (const std::exception& e) {
      w.error = e.what();
    }
    metrics_.vision_encode_slices += uint64_t(w.job->slices() - slices);
    w.busy_ms = w.job->busy_ms();
    if (w.job->ms_per_gflop() > 0) ms_per_gflop_ = w.job->ms_per_gflop();
    if (w.error.empty() && !w.job->done()) break;  // the budget is spent
    if (w.error.empty()) {
      try {
        w.rows = w.source->store(w.hash, w.job->take());
      } catch (const std::exception& e) {
        w.error = e.what();
      }
    }
    if (!w.error.empty()) logger()->error("{} encode failed: {}", w.kind, w.error);
    logger()->debug("{} encoded in {} slices, {:.1f} ms", w.kind, w.job->slices(), w.busy_ms);
    w.job.reset();
    encodes_.pop_front();
    left = budget_ms - ms_between(t0, Clock::now());
    if (left <= 0) break;
  }
}

}  // namespace tern::sched
