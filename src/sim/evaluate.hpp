// Plans every strategy for a workload and scores each plan in the simulator against the baseline (default
// clocks). Plans whose simulated step time exceeds the budget are re-planned with a tighter serial budget;
// every figure reported comes from the simulator (modelled), never from a planner's own sums.
#pragma once

#include <optional>
#include <vector>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "plan/schedule.hpp"
#include "sim/simulator.hpp"

namespace gearshift::sim {

struct EvaluateOptions {
  double max_slowdown = 0.005;  // ε: allowed step-time increase over the baseline, fraction
  std::vector<double> switch_latencies_ns = {0, 1e4, 1e5, 1e6, 6e6, 2e7};  // L sweep for the phase strategy
};

struct StrategyResult {
  plan::Schedule schedule;
  SimResult sim;
  double switch_latency_ns = 0;  // L the result was simulated with (0 for the ideal-switching strategies)
  double saving_pct = 0;         // (baseline energy − energy) / baseline energy · 100
  double slowdown_pct = 0;       // (time − baseline time) / baseline time · 100
  double plan_ms = 0;            // planner wall time incl. re-planning, ms (CPU, informative)
  bool within_budget = true;
};

struct Evaluation {
  SimResult baseline;
  std::vector<StrategyResult> strategies;  // iteration, pass, kernel-local, kernel-global, phase × L
};

// Calibrate the model so that the simulated baseline's average power equals a measured average power (W):
// the memory/uncore power at max memory clock (`memory_w_at_max`, the least known spec figure) is bisected on
// [0, board power], the GEMM cap constraint of power_params_for re-solved each time. When even 0 W or the
// board power cannot reach the measurement, the activity scale is bisected instead. Returns the calibrated
// parameters (also set on `m`); throws std::invalid_argument for a non-positive power. The workload's
// unsampled reference clocks are refreshed.
model::PowerParams calibrate_to_measured_power(model::Workload& w, model::DvfsModel& m, double measured_average_power_w);

Evaluation evaluate(const model::Workload& w, const model::DvfsModel& m, const EvaluateOptions& options);

}  // namespace gearshift::sim
