// Replay: drives the predictor and the scheduler with a recorded trace's launch stream in virtual time (no
// GPU), optionally perturbed, and scores them. The virtual clock is the trace's (ns). Launch times come from
// the trace when it has them, else start − cpu_lead (the CPU running ahead of the GPU). A kernel's activity
// record reaches the runtime activity_delay after it ends. Ground truth: each detected step's ops are aligned
// to the plan's positions by name (longest common subsequence); ops outside steps, and inserted ops, have none.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/actuator.hpp"
#include "runtime/clock_plan.hpp"
#include "runtime/predictor.hpp"
#include "runtime/scheduler.hpp"
#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::runtime {

struct Perturbation {
  double drop = 0, insert = 0, swap = 0;  // probabilities per launch, 0..1
  std::uint64_t seed = 1;
};
// Parses "drop=0.01,insert=0.01,swap=0" (values in 0..1, or with % as percent). Throws std::invalid_argument.
Perturbation parse_perturbation(const std::string& text);

// The plan is not this trace's job: its positions (name and kind, in order) and the trace's step template share
// less than ReplayOptions::min_plan_match of the longer one. A bad input (the plan), not a runtime failure.
class PlanMismatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The share of the longer of (plan positions, trace template) whose names and kinds align in order with the other
// (plan::position_match_share; memcpy and memset count as one kind: the runtime's plan keeps only "not a kernel").
double plan_match_share(const ClockPlan& plan, const trace::Trace& trace, const trace::IterationAnalysis& analysis);

struct ReplayOptions {
  // Below this plan_match_share the plan is refused (PlanMismatchError). The ranks of one data-parallel job share
  // 0.93 (ddp2 gpt2-medium rank 0 vs 1); GPT-3 XL vs GPT-2 medium, both 24 layers, 0.68; 0 accepts any plan.
  double min_plan_match = 0.8;
  SchedulerOptions scheduler;
  PredictorOptions predictor;
  Perturbation perturb;
  double cpu_lead_ns = 2e6;        // launch = start − this when the trace has no launch times, ns
  double activity_delay_ns = 1e6;  // completion known this long after the kernel ends, ns
  // Sampled activity (a study of recording kernel activity only part of the time, to cut CUPTI's per-kernel
  // cost): with a period > 0 only kernels starting in the first `activity_window_ns` of each period (from the
  // first op) report a completion, ns. 0: every kernel does.
  double activity_period_ns = 0;
  double activity_window_ns = 0;
  // GPU progress from one synchronize at the end of every step (a job that synchronizes each step, as
  // `gearshift run --gpu-progress sync` uses it): entered 10 µs after the step's last launch, returned when its
  // last kernel ends (at once when that ended before); completions then do not anchor.
  bool sync_each_step = false;
  // Stream markers (with sync_each_step, as `gearshift run --gpu-progress markers`): the first kernel launched
  // at least marker_period_ns after the last marker was seen carries one; the feed's writer, polling every
  // marker_poll_ns (on a grid from time 0), sees it at the first poll after the kernel ends. 0: none. ns.
  double marker_period_ns = 0;
  double marker_poll_ns = 500e3;
};

struct ReplayResult {
  // Launches after the first step placed at their true position. Positions inside one run of identical
  // consecutive kernel names count as one (the launch stream cannot tell which of them a missing launch was
  // until the run ends, and they share a phase); strict_position_accuracy does not merge them.
  double prediction_accuracy = 0;
  double strict_position_accuracy = 0;
  double next_kernel_accuracy = 0;  // launches after the first step that the predictor expected (runs merged)
  double in_time_fraction = 0;      // kernel time after the first step at its intended clocks (given L)
  std::uint64_t changes = 0, dropped_changes = 0, merged_changes = 0, late_changes = 0;
  std::uint64_t steps = 0;          // steps the predictor went through
  std::uint64_t launches = 0, scored_launches = 0;
  std::uint64_t dropped_ops = 0, inserted_ops = 0, swapped_ops = 0;
  std::uint64_t relocks = 0, losses = 0;
};

// Throws trace::NoIterationError when the trace has no steps to score, PlanMismatchError when the plan was made for
// another job.
ReplayResult replay(const trace::Trace& trace, const ClockPlan& plan, const ReplayOptions& options,
                    Actuator* actuator = nullptr);

}  // namespace gearshift::runtime
