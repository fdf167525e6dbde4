// A plan.json as the runtime follows it, and the switching it runs with: what `gearshift run`, `gearshift replay`
// and the Python runtime share.
#pragma once

#include <optional>
#include <string>

#include "runtime/clock_plan.hpp"
#include "runtime/scheduler.hpp"

namespace gearshift::service {

// The clock-change latency L and the minimum interval between changes, ns; none: the plan's L, and L. (The CLI's
// --switch-latency-ms and --min-interval-ms are converted once, by cli/switching_args.hpp.)
struct Switching {
  std::optional<double> latency_ns;
  std::optional<double> min_interval_ns;
};

// The scheduler options for `plan` under `s`; sets s.latency_ns to the L used. Throws ServiceError(kBadArgument)
// when either is < 0.
runtime::SchedulerOptions scheduler_options(const runtime::ClockPlan& plan, Switching& s);

// runtime::load_plan (plan::read_plan_file, the one reader of plan.json) with its plan::PlanFileError as
// ServiceError(kBadPlan).
runtime::ClockPlan load_live_plan(const std::string& path);

}  // namespace gearshift::service
