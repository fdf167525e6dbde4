#include "service/live_plan.hpp"

#include "plan/plan_file.hpp"
#include "service/error.hpp"

namespace gearshift::service {

runtime::SchedulerOptions scheduler_options(const runtime::ClockPlan& plan, Switching& s) {
  if (!s.latency_ms) s.latency_ms = plan.switch_latency_ns / 1e6;
  if (!(*s.latency_ms >= 0)) throw ServiceError(ServiceError::Kind::kBadArgument, "--switch-latency-ms must be >= 0");
  if (s.min_interval_ms && !(*s.min_interval_ms >= 0))
    throw ServiceError(ServiceError::Kind::kBadArgument, "--min-interval-ms must be >= 0");
  runtime::SchedulerOptions so;
  so.switch_latency_ns = *s.latency_ms * 1e6;
  so.min_interval_ns = s.min_interval_ms.value_or(*s.latency_ms) * 1e6;
  return so;
}

runtime::ClockPlan load_live_plan(const std::string& path) {
  try {
    return runtime::load_plan(path);
  } catch (const plan::PlanFileError& e) {  // a bad plan is a bad input file
    throw ServiceError(ServiceError::Kind::kBadPlan, e.what());
  }
}

}  // namespace gearshift::service
