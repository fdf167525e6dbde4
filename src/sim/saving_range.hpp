// Error bars on a plan's modelled saving and step time (issue 20, part 3). The class priors of the kernels'
// DVFS coefficients are uncertain (model/prior_spread.hpp: their spread measured on public kernel sweeps), so
// the plan is re-simulated under draws of the coefficients: per draw, each kernel class gets one shift of its
// sm_share a and one log-factor of its activity (the class prior's error is shared by the class's kernels),
// and the baseline (default clocks) and the plan are both simulated with the drawn coefficients. The saving
// and slowdown of a draw are relative to that draw's own baseline; the drawn models are not re-calibrated to
// the trace's measured power (a level error cancels in the relative saving to first order). Ops whose
// coefficients were not set from their class (none today) are drawn like their class.
// Cost: 2 simulations per draw.
#pragma once

#include <cstdint>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "plan/schedule.hpp"

namespace gearshift::sim {

struct RangeOptions {
  int samples = 200;           // draws (> 0)
  std::uint64_t seed = 20;     // fixed: the same trace gives the same range
  double low_quantile = 0.05;  // the range is [low, high] quantile of the draws
  double high_quantile = 0.95;
};

struct SavingRange {
  int samples = 0;
  double low_quantile = 0, high_quantile = 0;
  double saving_low_pct = 0, saving_expected_pct = 0, saving_high_pct = 0;  // % of baseline energy
  double time_low_ns = 0, time_expected_ns = 0, time_high_ns = 0;           // plan's step time, ns
  double slowdown_low_pct = 0, slowdown_high_pct = 0;                       // % of each draw's baseline
  double p_over_budget = 0;  // share of draws whose slowdown exceeds the budget, 0..1
};

// `expected` is the unperturbed model's figure (what the plan's table shows). Throws std::invalid_argument for
// samples <= 0 or quantiles outside 0 <= low <= high <= 1.
SavingRange saving_range(const model::Workload& w, const model::DvfsModel& m, const plan::Schedule& plan,
                         double switch_latency_ns, double max_slowdown, const RangeOptions& o = {});

}  // namespace gearshift::sim
