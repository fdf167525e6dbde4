// A stage profile (profile.hpp) built from measured runs of several clock plans (issue 47 item 3): each plan's
// Perseus sched.json (the SM clock of every computation; plan_formats.hpp places them by Merak's order) with its
// prof.json (measured_run.hpp: per-microbatch times and per-rank iteration energies, MEASURED).
//
// Time of a row (stage, instruction, clock) [s]: the mean of every measured forward (with the load before it) or
// backward of that stage run at that clock, over the plans and their iterations after the first. Rows are kept
// for the clocks inside every (stage, instruction)'s measured range; a clock inside a range but not measured there
// is linearly interpolated between the nearest measured clocks (counted in `interpolated_rows`); clocks outside
// some range are dropped (listed), so a plan naming one is refused by --evaluate rather than extrapolated.
//
// Power: no per-instruction energy is measured, only each rank's energy per iteration. Fitted by least squares over
// every (plan, rank):
//   E_r = Σ_{computations i of r} (a_s + b_s·c_i/1000)·t_i + P_block·(T_r − busy_r)      [J]
// with t_i the computation's measured time [s], c_i its clock [MHz], busy_r = Σ t_i, T_r the rank's measured
// iteration time: 2·S + 1 unknowns (a_s [W], b_s [W/GHz] per stage, one P_block [W] for every GPU while waiting).
// What it leaves undetermined: the split between forward and backward power (one busy power per stage and clock,
// so forward and backward at the same clock draw the same), the power of loads (counted as forward time) and of
// the left-out time (sends, optimizer step: counted as waiting, at P_block), and any curvature of power in clock
// (a line in c: over 1005–1410 MHz a line fitted the Perseus runs' energies better than a + b·c³).
// A row's energy [J] = (a_s + b_s·c/1000)·time. MODELLED power, MEASURED times.
#pragma once

#include <string>
#include <vector>

#include "pipeline/evaluate.hpp"
#include "pipeline/measured_run.hpp"
#include "pipeline/profile.hpp"

namespace gearshift::pipeline {

struct MeasuredPlan {
  std::string name;         // e.g. "7", for messages
  MeasuredRun run;          // its prof.json
  ClockSchedule schedule;   // its sched.json (instructions and microbatches placed)
};

struct StagePower {
  double a_w = 0;         // busy power at 0 MHz extrapolated [W]
  double b_w_per_ghz = 0; // slope [W per 1000 MHz]
  double at(int mhz) const { return a_w + b_w_per_ghz * mhz / 1000.0; }
};

struct MeasuredProfile {
  Profile profile;                 // gearshift rows, stage order, source "measured"
  double blocking_power_w = 0;     // fitted P_block [W]
  std::vector<StagePower> power;   // [stage]
  double rms_residual_j = 0;       // RMS of E_r − fit over the (plan, rank) rows [J]
  double max_residual_pct = 0;     // largest |E_r − fit| / E_r [%]
  int plans = 0;
  int interpolated_rows = 0;
  std::vector<int> dropped_clocks;  // measured somewhere but outside some group's range [MHz]
};

// Throws PipelineError on: no plans; plans whose rank or microbatch counts differ (from each other or between a
// plan's two files); a sched that is not one clock per forward/backward of each microbatch; no clock common to
// every (stage, instruction); a power fit the plans do not determine (fewer (plan, rank) rows than unknowns, or
// every plan at one clock: a and b inseparable); a fitted power ≤ 0 W busy or < 0 W waiting.
MeasuredProfile build_measured_profile(const std::vector<MeasuredPlan>& plans);

// The profile as gearshift's CSV (profile.hpp) with '#' lines stating its origin, the fitted powers and P_block.
std::string measured_profile_csv(const MeasuredProfile& mp, const std::string& origin);

}  // namespace gearshift::pipeline
