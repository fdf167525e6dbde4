// The back-off ladder between a plan and the baseline clocks: the plan scaled by a fraction alpha in [0, 1], with
// alpha = 1 the plan as made and alpha = 0 the baseline (default clocks). Each position's clock moves from the
// default toward the plan's clock linearly in 1/f (time per cycle), so that under the time law t ∝ 1/f the step's
// added time is linear in alpha, and is snapped up to the next supported clock (never a clock below the plan's
// nor above the default: nothing outside what the GPU supports and the plan allowed).
//
// Why a ladder of the plan itself rather than re-planning at smaller budgets: the runtime holds one plan (plan.json
// carries one), and a measured slowdown that breaks the budget says the job is more clock-sensitive than the model
// said, by a factor the blocks measure; scaling every lowered clock back by the same share is what that one
// measured factor supports (docs/verification.md).
#pragma once

#include <vector>

#include "model/dvfs_model.hpp"

namespace gearshift::verify {

struct Ladder {
  std::vector<double> duration_ns;          // each position's time at the baseline clocks, ns (weights)
  std::vector<model::ClockPair> plan;       // each position's clocks in the plan, MHz
  model::ClockPair baseline;                // the default clocks, MHz
  std::vector<int> sm_clocks_mhz;           // supported SM clocks, ascending; empty: no snapping
  std::vector<int> mem_clocks_mhz;          // supported memory clocks, ascending; empty: no snapping

  // Each position's clocks at `alpha` (clamped to [0, 1]).
  std::vector<model::ClockPair> clocks_at(double alpha) const;
  // The clock shape of the slowdown at `alpha`: the duration-weighted mean of (f_base / f - 1) over SM clocks of the
  // positions at clocks_at(alpha), a dimensionless figure that a job's measured slowdown is proportional to when
  // its time follows a·f_base/f + (1 - a) with one sensitivity a (the factor blocks estimate). 0 at alpha = 0.
  double shape(double alpha) const;
  // The largest alpha on a grid of 1/64 whose shape is at most `shape_limit` (0 when none but 0 is).
  double alpha_for_shape(double shape_limit) const;
};

}  // namespace gearshift::verify
