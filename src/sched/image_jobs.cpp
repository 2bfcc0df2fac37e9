#include "image_jobs.h"

#include <algorithm>
#include <chrono>

#include "tern/core/log.h"

namespace tern::sched {
namespace {

const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = tern::log::get("sched");
  return l;
}

}  // namespace

std::shared_ptr<ImageWait> ImageJobs::find(const vision::MediaSpan& m) const {
  for (const auto& w : jobs_)
    if (w->source == m.source.get() && w->hash == m.hash) return w;
  return nullptr;
}

std::shared_ptr<ImageWait> ImageJobs::start(const vision::MediaSpan& m, uint64_t starter,
                                            Metrics& metrics) {
  std::unique_ptr<vision::EncodeJob> job = m.source->start_encode(m.image);
  if (!job) return nullptr;
  if (ms_per_gflop_ > 0) job->set_ms_per_gflop(ms_per_gflop_);
  auto w = std::make_shared<ImageWait>();
  w->source = m.source.get();
  w->hash = m.hash;
  w->starter = starter;
  w->job = std::move(job);
  jobs_.push_back(w);
  metrics.vision_encodes += 1;
  return w;
}

void ImageJobs::drop_unwaited(Metrics& metrics) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->use_count() > 1) {  // a sequence still holds it
      ++it;
      continue;
    }
    logger()->info("image encode dropped after {} of {} stages: nobody waits for it",
                   (*it)->job->stages_done(), (*it)->job->stages_total());
    metrics.vision_encodes_dropped += 1;
    it = jobs_.erase(it);
  }
}

void ImageJobs::advance(TaskPool& pool, double budget_ms, Metrics& metrics) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  double left = budget_ms;
  while (!jobs_.empty()) {
    ImageWait& w = *jobs_.front();
    const int slices = w.job->slices();
    try {
      w.job->advance(pool, left);
    } catch (const std::exception& e) {
      w.error = e.what();
    }
    metrics.vision_encode_slices += uint64_t(w.job->slices() - slices);
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
    if (!w.error.empty()) logger()->error("image encode failed: {}", w.error);
    logger()->debug("image encoded in {} slices, {:.1f} ms", w.job->slices(), w.busy_ms);
    w.job.reset();
    jobs_.pop_front();
    left = budget_ms - std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (left <= 0) break;
  }
}

}  // namespace tern::sched
