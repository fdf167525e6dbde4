// The other reading of power that the calibration could not place.
//
// calibrate_to_measured_power (sim/evaluate.hpp) reproduces one measured average power by moving the memory/
// uncore term: what the class priors' SM power leaves of the measurement lands there. When that term is more
// than memory can draw (kMaxMemoryShareOfBoard, sim/measurement.hpp), the surplus is power the model could not
// place. It may follow the SM clock (kernels more active than their class priors say: torch.compile's fused
// Triton kernels, H200 session 23) or not (uncore, short gaps). An SM-clock plan's saving and slowdown depend
// on which, and one measured power cannot tell them apart. So the plan is also simulated with the surplus read
// as SM activity: memory/uncore at the bound, each non-GEMM kernel's activity raised by the same number z of
// standard deviations of its class prior's measured error (ln activity, model/prior_spread.hpp: a copy's by
// little, an unclassified kernel's by much; none above a dense GEMM's, which the GEMM clock sag at the power cap
// fixes, as in sim/saving_range.hpp) until the baseline reproduces the measured power again, z at most
// kMaxReadingSigmas. A plan that keeps its budget under both readings is shown
// with both savings; one that does not is refused (service/plan_job.cpp). Where the memory reading is
// impossible (sim::implausible_calibration: memory/uncore power the board cannot draw with its SMs idle) and this
// one reproduces the power, the plan is made in this one, the
// memory clock held at its default either way (Megatron-LM on an H200, session 24: 647 W over its true step needs
// 603 W of memory/uncore power).
#pragma once

#include <string>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "plan/schedule.hpp"

namespace gearshift::sim {

// The most standard deviations of the priors' error the activity reading may ask of every class at once: 2 (a
// 95 % two-sided interval of one class; several classes all off by that much is rarer still).
inline constexpr double kMaxReadingSigmas = 2.0;

// A model (or a draw of the error bars, sim/saving_range.cpp) reproduces the measured power when its baseline is
// within 1 % of it: the power cap's discrete clocks make the power step by up to ~1 % as ops cap, and the
// calibration's own match is as close.
inline constexpr double kPowerLevelTolerance = 0.01;

struct SurplusAsActivity {
  bool reached = false;         // the raised activities reproduce the measured power within 1 %, z <= kMaxReadingSigmas
  double memory_w = 0;          // memory/uncore power at full traffic in this reading, W (the bound)
  double sigmas = 0;            // z: standard deviations of each class prior's activity error (at most the bound)
  double baseline_power_w = 0;  // the reading's simulated baseline power at default clocks, W
};

// Rewrites `w` (non-GEMM activities, unsampled reference clocks) and `m` (power parameters: memory/uncore at
// `memory_w` W, activity scale 1) into the reading where the power the calibrated `m` put above `memory_w` is
// SM activity, so that the baseline reproduces `measured_w` W. `reached` is false when even kMaxReadingSigmas
// stay below it (`w` and `m` are then left at that bound). Throws std::invalid_argument for a non-positive
// `measured_w` or a negative `memory_w`.
SurplusAsActivity place_surplus_as_activity(model::Workload& w, model::DvfsModel& m, double measured_w,
                                            double memory_w);

// "the calibration puts M W in memory/uncore power, more than the B W memory can draw; read instead as SM activity
// (...z... standard deviations ...), the same measured P W gives": how `plan` and `plan-ranks` begin a plan's
// figures in the other reading (`memory_w`: the calibration's, `bound_w`: what memory can draw).
std::string other_reading_intro(double memory_w, double bound_w, double sigmas, double measured_w);

struct PlanUnderReading {
  double saving_pct = 0;    // (baseline energy - plan energy) / baseline energy · 100, both in the reading
  double slowdown_pct = 0;  // (plan step time - baseline step time) / baseline step time · 100
  double baseline_step_ns = 0;
};

// A plan in the other reading may slow the step a little more than the budget where a cap's discrete clocks move
// its baseline: 0.05 % of step time, a tenth of the 0.5 % budget the device checks run at
// (bench/results/2026-12-05-s27-family-checks.md).
inline constexpr double kReadingSlowdownTolerance = 0.0005;

// Why a plan must be refused for its figures in the other reading `p`: it costs energy there (saving <= 0) or
// slows the step by more than `max_slowdown` (fraction) plus kReadingSlowdownTolerance. Empty when neither.
std::string refusal_in_reading(const PlanUnderReading& p, double max_slowdown);

// The plan `s` simulated at latency `switch_latency_ns` against the default clocks, both in the model (`w`, `m`).
PlanUnderReading plan_under(const model::Workload& w, const model::DvfsModel& m, const plan::Schedule& s,
                            double switch_latency_ns);

}  // namespace gearshift::sim
