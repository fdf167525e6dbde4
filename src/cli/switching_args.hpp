// The plan and switching options `gearshift run` and `gearshift replay` share: --switch-latency-ms and
// --min-interval-ms (defaults: the plan's L, and L), and the plan.json they apply.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "runtime/clock_plan.hpp"
#include "runtime/scheduler.hpp"

namespace gearshift::cli {

struct SwitchingArgs {
  std::optional<double> latency_ms;       // ms; none: the plan's switch latency
  std::optional<double> min_interval_ms;  // ms; none: the switch latency

  void add_to(CLI::App* cmd);
  // The scheduler options for `plan`; sets latency_ms to the value used. Throws Exit(kUsage) when < 0.
  runtime::SchedulerOptions resolve(const runtime::ClockPlan& plan);
};

// runtime::load_plan (plan::read_plan_file) with its plan::PlanFileError as Exit(kBadInput).
runtime::ClockPlan load_plan_or_exit(const std::string& path);

}  // namespace gearshift::cli
