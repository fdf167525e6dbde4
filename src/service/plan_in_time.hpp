// The in-time check of a phase plan: can the runtime land its clock changes at their boundaries on this job?
//
// A phase plan's modelled saving and step time assume each change lands as its phase begins. The runtime issues a
// change L before the boundary's estimated GPU time (runtime/scheduler.hpp); where the job's steps vary more than
// that estimate can follow, kernels run at clocks planned for others, and the fraction of kernel time at the
// intended clocks falls with the number of changes per step times the boundaries' timing error. Measured on an
// H200 (bench/results/2026-12-03-s13-power-limit.md and 2026-12-03-s14-step-variants.md, sessions 13-14): gradient
// checkpointing's 16-phase plan ran 93.8-96.3 % in time with boundary errors of about ±1 ms (10-90 %); a Mixtral-like
// MoE's 24-phase plan 70.2 %.
//
// So before a plan is handed on, it is replayed on the trace it was made from (runtime/replay.hpp: the runtime's
// own predictor and scheduler in virtual time, with the job's synchronizes and stream markers as `gearshift run`
// anchors on by default) and its in-time fraction measured. Below the target, the same budget's plans with fewer,
// longer phases (sim::Evaluation::coarser) are replayed in turn, and past them the one-clock-pair plan (no change
// inside the step) is taken: a smaller modelled saving that the runtime can follow instead of a larger one it
// cannot. Each rung tried is kept for the report.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/clock_plan.hpp"
#include "sim/evaluate.hpp"
#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::service {

// The replayed in-time fraction a plan needs: above the runtime's guard (runtime::kMinInTime, 95 %), because live
// lands fewer changes in time than replay of the job's own trace says (H200,
// bench/results/2026-12-03-s15-in-time-check.md): gradient checkpointing's plan replayed 98.5 % at planning and ran
// 96.2 % live, its guard falling back at step 60 on a 94.0 % window; a Mixtral-like MoE's 80.6 % replayed ran 70.2 %
// live. At 97 % gradient accumulation's plan (99.3 % replayed) ran 99.4 % live and the guard held.
inline constexpr double kPlanMinInTime = 0.97;
// Steps replayed per rung (after the first, which the predictor locks on): bounds the check's cost on long traces
// (a 140-iteration Megatron-LM trace replays in about 9 s CPU; its first 32 steps in about 2 s).
inline constexpr std::size_t kInTimeCheckSteps = 16;

struct InTimeRung {
  const sim::StrategyResult* plan = nullptr;
  double min_phase_ns = 0;          // the rung's phases last at least this, ns (0: the plan's L; +inf: one pair)
  std::optional<double> in_time;    // replayed in-time fraction of kernel time; none: not replayed (one pair)
  std::string boundary_errors;      // runtime::describe_boundary_errors of the replay
  std::string label() const;        // "phases >= 24 ms", "one clock pair", "phase at L = 6 ms"
};

struct InTimeCheck {
  bool checked = false;
  std::string skipped;              // why not, in words (checked false)
  double target = kPlanMinInTime;
  double switch_latency_ns = 0;     // L the changes were replayed with, ns
  std::size_t steps_replayed = 0;   // per rung
  // What anchored the replay's GPU progress besides the markers: "the job's N synchronizes" (the trace recorded
  // them) or "one synchronize assumed at each step's end" (it did not).
  std::string anchors;
  std::vector<InTimeRung> rungs;    // in the order tried; the last one is taken
  const InTimeRung* taken() const { return rungs.empty() ? nullptr : &rungs.back(); }
  bool coarsened() const { return rungs.size() > 1; }
  // One line: what was replayed and what was taken ("in-time check: ... ").
  std::string summary() const;
};

// Replays each rung's plan, in order, on `trace` (steps as `analysis` found them) until one reaches `target`; the
// last rung is taken without replay when it has no change inside the step. `clock_plan_of` turns a rung's plan into
// the runtime's plan (plan.json's positions). Never throws for a plan the replay cannot score (no step after the
// first): the check is then skipped, with the reason.
InTimeCheck check_in_time(const trace::Trace& trace, const trace::IterationAnalysis& analysis,
                          const std::vector<InTimeRung>& ladder,
                          const std::function<runtime::ClockPlan(const sim::StrategyResult&)>& clock_plan_of,
                          double switch_latency_ns, double target = kPlanMinInTime,
                          std::size_t max_steps = kInTimeCheckSteps);

}  // namespace gearshift::service
