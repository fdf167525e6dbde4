// The step `run --auto` planned while its untraced length is measured (AutoPlanner's state `measuring`), shared by
// auto_plan.cpp (the warm-up loop that waits on it) and auto_plan_untraced.cpp (the measurement and what follows
// from it). Internal to service/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "monitor/counter_tick.hpp"
#include "runtime/untraced_step.hpp"
#include "service/auto_plan.hpp"
#include "service/plan_job.hpp"

namespace gearshift::service {

struct AutoPlanner::Candidate {
  std::unique_ptr<PlanJobResult> r;
  PlanJobOptions po;
  std::uint32_t source = 0;
  double traced_period_ns = 0;  // the template's step (what the runtime's offsets time), ns
  std::int64_t stop_ns = 0;     // when the job was asked to stop recording (CLOCK_MONOTONIC), ns
  double launches_per_step = 0;  // in the traced steps (runtime::launches_per_step)
  std::string anchor;            // the kernel whose launches count the steps (runtime::step_anchor_name); "": none
  runtime::UntracedStep meter;
  std::int64_t energy_from_ns = -1;        // when the energy counter was first read after the settle time, ns
  std::optional<monitor::CounterAtTick> energy_from;  // that reading
  std::uint64_t others_launches = 0;       // launches of other processes on the run's GPU meanwhile
  bool measured_again = false;             // a first window that could not be the job's step was measured again
  runtime::UntracedStepOptions untraced;   // the window's options (measured again: over more steps)
};

// How long the untraced window may take, ns (AutoOptions::untraced_timeout_ns).
inline std::int64_t untraced_wait_limit_ns(const AutoOptions& o, const runtime::UntracedStepOptions& u,
                                           double traced_period_ns) {
  return std::max(o.untraced_timeout_ns,
                  static_cast<std::int64_t>(u.settle_ns + 3.0 * static_cast<double>(u.min_steps) * traced_period_ns));
}

}  // namespace gearshift::service
