// Plans every strategy for a workload and scores each plan in the simulator against the baseline (default
// clocks). Plans whose simulated step time exceeds the budget are re-planned with a tighter serial budget;
// every figure reported comes from the simulator (modelled), never from a planner's own sums.
//
// One optimizer truth: the planners search the simulator's own account (plan/clock_table.hpp), so that on one
// stream a plan's table sums are its simulated step time and energy with instant switching. A phase plan of
// latency L lasts at least L per phase, so it runs exactly as with instant switching and is also a plan of
// every shorter latency: every phase plan and every ideal plan is a kernel plan. Therefore kernel-global takes
// the best of its knapsack solution and every other plan the evaluation made (the knapsack's proven lower
// bound, `optimality_gap`, says how far any plan can beat it), and phase at L the best of every plan that
// runs with no late change at L, its own and the longer latencies' included. So, exactly: phase(L) saves no
// more than the ideal kernel-global, and phase's saving does not rise with L; the same holds per budget
// over the frontier, where no strategy's saving falls as the budget grows.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "plan/schedule.hpp"
#include "sim/simulator.hpp"

namespace gearshift::sim {

struct EvaluateOptions {
  double max_slowdown = 0.005;  // ε: allowed step-time increase over the baseline, fraction
  // L sweep for the phase strategy, ns. 50 and 100 ms: public sources put Hopper's clock changes at 10-100 ms
  // (issue 45), the specs at 6 ms: the table shows what the plan keeps if the switch is that slow.
  std::vector<double> switch_latencies_ns = {0, 1e4, 1e5, 1e6, 6e6, 2e7, 5e7, 1e8};
  // The savings frontier: every strategy at these slowdown budgets (fractions; empty: none), phase at
  // `frontier_latency_ns` (ns; none: the GPU spec's switch latency).
  std::vector<double> frontier_slowdowns = {0, 0.005, 0.01, 0.02, 0.05, 0.10};
  std::optional<double> frontier_latency_ns = std::nullopt;
  // Phase plans at `max_slowdown` whose phases last at least each of these, ns (Evaluation::coarser): the plans
  // with fewer, longer phases that a plan falls back to when its changes cannot be timed closely enough
  // (service/plan_in_time.hpp). Empty: none.
  std::vector<double> min_phase_ladder_ns = {};
};

struct StrategyResult {
  plan::Schedule schedule;
  SimResult sim;
  double switch_latency_ns = 0;  // L the result was simulated with (0 for the ideal-switching strategies)
  double saving_pct = 0;         // (baseline energy − energy) / baseline energy · 100
  double slowdown_pct = 0;       // (time − baseline time) / baseline time · 100
  std::int64_t plan_ns = 0;      // planner wall time incl. re-planning, ns (CPU, informative; JSON "plan_ms")
  bool within_budget = true;
  // Shortest phase of the plan on its simulated timeline (start of a change's op to the next one's, cyclic),
  // ns; +inf without changes. The plan runs with no late change, exactly as with instant switching, at every
  // latency up to this one.
  double shortest_phase_ns = 0;
  // Evaluation::coarser: every phase lasts at least this long, ns (the latency it was planned for; it runs with
  // the same figures at any shorter one). 0 otherwise.
  double min_phase_ns = 0;
};

struct FrontierPoint {
  double max_slowdown = 0;                 // the budget ε, fraction
  std::vector<StrategyResult> strategies;  // iteration, pass, kernel-local, kernel-global, phase at the latency
};

struct Evaluation {
  SimResult baseline;
  std::vector<StrategyResult> strategies;  // iteration, pass, kernel-local, kernel-global, phase × L
  double frontier_latency_ns = 0;          // L of the frontier's phase plans
  std::vector<FrontierPoint> frontier;     // per budget of EvaluateOptions::frontier_slowdowns, ascending
  // Phase at max_slowdown per EvaluateOptions::min_phase_ladder_ns (ascending; min_phase_ns set; each the best
  // plan that runs with no late change at that latency, as phase at L is).
  std::vector<StrategyResult> coarser;
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
