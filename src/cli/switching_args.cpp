#include "cli/switching_args.hpp"

#include "cli/commands.hpp"

namespace gearshift::cli {

void SwitchingArgs::add_to(CLI::App* cmd) {
  // Checked when given; not given stays none.
  cmd->add_option("--switch-latency-ms", latency_ms, "Clock-change latency L, ms (default: the plan's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-interval-ms", min_interval_ms, "Merge changes closer than this, ms (default: L)")
      ->check(CLI::NonNegativeNumber);
}

runtime::SchedulerOptions SwitchingArgs::resolve(const runtime::ClockPlan& plan) {
  if (!latency_ms) latency_ms = plan.switch_latency_ns / 1e6;
  if (!(*latency_ms >= 0)) throw Exit(kUsage, "--switch-latency-ms must be >= 0");
  if (min_interval_ms && !(*min_interval_ms >= 0)) throw Exit(kUsage, "--min-interval-ms must be >= 0");
  runtime::SchedulerOptions so;
  so.switch_latency_ns = *latency_ms * 1e6;
  so.min_interval_ns = min_interval_ms.value_or(*latency_ms) * 1e6;
  return so;
}

runtime::ClockPlan load_plan_or_exit(const std::string& path) {
  try {
    return runtime::load_plan(path);
  } catch (const plan::PlanFileError& e) {  // plan/plan_file.hpp: a bad plan is a bad input file
    throw Exit(kBadInput, e.what());
  }
}

}  // namespace gearshift::cli
