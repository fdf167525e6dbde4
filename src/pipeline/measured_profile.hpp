// A stage profile (profile.hpp) built from measured runs of several clock plans (issue 47 item 3): each plan's
// Perseus sched.json (the SM clock of every computation; plan_formats.hpp places them by Merak's order) with its
// prof.json (measured_run.hpp: per-microbatch times and per-rank iteration energies, MEASURED).
//
// Time of a row (stage, instruction, clock) [s]: the mean of every measured forward (with the load before it) or
// backward of that stage run at that clock, over the plans and their iterations after the first. Every clock
// measured anywhere gets a row in every (stage, instruction) (validate_profile wants one clock set): where that
// group did not run it, its time is linear in clock between the two nearest measured clocks around it
// (`interpolated_rows`) or, outside the group's measured range, through the two nearest on its side
// (`extrapolated_rows`; e.g. a plan that alone ran stage 0 at 1050 MHz, left out, leaves 1050 MHz outside other
// stages' range). A clock no plan measured is not in the profile, and --evaluate refuses a plan naming it, unless
// `clock_step_mhz` > 0: then every clock from the highest measured one down by that step to the lowest gets a row
// too (interpolated; e.g. 15 MHz, the A100's clock step, so that a plan left out can still be priced at a clock
// only it ran).
//
// Power: no per-instruction energy is measured, only each rank's energy per iteration. Fitted by least squares over
// every (plan, rank):
//   E_r = Σ_{computations i of r} P_s(c_i)·t_i + P_block·(T_r − busy_r)      [J],   P_s(c) = a_s + b_s·x + k·x²,
// x = c/1000, with t_i the computation's measured time [s], c_i its clock [MHz], busy_r = Σ t_i, T_r the rank's
// measured iteration time: 2·S + 2 unknowns (a_s [W], b_s [W/GHz] per stage; one curvature k [W/GHz²], the same
// GPU model on every rank; one P_block [W] for every GPU while waiting).
// What it leaves undetermined: the split between forward and backward power (one busy power per stage and clock,
// so forward and backward at the same clock draw the same), the power of loads (counted as forward time) and of
// the left-out time (sends, optimizer step: counted as waiting, at P_block), and any shape of power in clock beyond
// a parabola whose curvature all stages share (why this form: docs/pipeline.md, "pipeline-profile").
// A row's energy [J] = P_s(c)·time. MODELLED power, MEASURED times.
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
  double a_w = 0;            // [W]
  double b_w_per_ghz = 0;    // [W per 1000 MHz]
  double k_w_per_ghz2 = 0;   // [W per (1000 MHz)²], the same for every stage
  double at(int mhz) const {  // busy power at `mhz` [W]
    const double x = mhz / 1000.0;
    return a_w + b_w_per_ghz * x + k_w_per_ghz2 * x * x;
  }
};

struct MeasuredProfile {
  Profile profile;                 // gearshift rows, stage order, source "measured"
  double blocking_power_w = 0;     // fitted P_block [W]
  std::vector<StagePower> power;   // [stage]
  double rms_residual_j = 0;       // RMS of E_r − fit over the (plan, rank) rows [J]
  double max_residual_pct = 0;     // largest |E_r − fit| / E_r [%]
  int plans = 0;
  int interpolated_rows = 0;        // rows between a group's measured clocks
  int extrapolated_rows = 0;        // rows outside a group's measured range
};

// Throws PipelineError on: no plans; plans whose rank or microbatch counts differ (from each other or between a
// plan's two files); a sched that is not one clock per forward/backward of each microbatch; a (stage, instruction)
// measured at one clock only; a power fit the plans do not determine (fewer (plan, rank) rows than unknowns, or
// too few clocks in the plans to tell the terms apart); a fitted power ≤ 0 W busy or < 0 W waiting.
MeasuredProfile build_measured_profile(const std::vector<MeasuredPlan>& plans, int clock_step_mhz = 0);

// The profile as gearshift's CSV (profile.hpp) with '#' lines stating its origin, the fitted powers and P_block.
std::string measured_profile_csv(const MeasuredProfile& mp, const std::string& origin);

}  // namespace gearshift::pipeline
