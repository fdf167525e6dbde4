#include "service/live_plan.hpp"

#include "plan/plan_file.hpp"
#include "service/error.hpp"

namespace gearshift::service {

runtime::SchedulerOptions scheduler_options(const runtime::ClockPlan& plan, Switching& s) {
  if (!s.latency_ns) s.latency_ns = plan.switch_latency_ns;
  if (!(*s.latency_ns >= 0)) throw ServiceError(ServiceError::Kind::kBadArgument, "--switch-latency-ms must be >= 0");
  if (s.min_interval_ns && !(*s.min_interval_ns >= 0))
    throw ServiceError(ServiceError::Kind::kBadArgument, "--min-interval-ms must be >= 0");
  runtime::SchedulerOptions so;
  so.switch_latency_ns = *s.latency_ns;
  so.min_interval_ns = s.min_interval_ns.value_or(*s.latency_ns);
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
