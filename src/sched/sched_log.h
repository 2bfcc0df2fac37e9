#pragma once
// What the scheduler's files share for logging and timing: the "sched"
// logger and durations between two steady-clock points. Private to src/sched.
#include <chrono>
#include <memory>

#include "tern/core/log.h"
#include "tern/sched/request.h"

namespace tern::sched {

inline const std::shared_ptr<spdlog::logger>& logger() {
  static const auto l = tern::log::get("sched");
  return l;
}

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace tern::sched
