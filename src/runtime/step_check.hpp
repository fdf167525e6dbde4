// The live check `gearshift run --auto` puts on a step before it applies a plan for it. The step detector's
// contract (trace/iteration.hpp, docs/step-detection.md) judges the kernel stream the warm-up collected; this
// judges the step against what the job did on the wall clock, with two tests:
//  1. the modelled step (the simulator at the traced clocks) agrees within kMaxLiveStepDisagreement with the wall
//     period of the detected steps (median start-to-start on the feed's CLOCK_MONOTONIC timeline) that its
//     template was built from (`--auto`: the latest ones): a template that lost kernels (CUDA graphs whose kernels
//     the feed never named) or holds one-off work fails here. Compared with every step found instead, a job whose
//     step time drifts failed a right step (H200 MoE, session 21: a template of the latest 19 steps modelled at
//     207.85 ms against the median of all 135, 177.98 ms: +16.8 %, and the job ran traced to its end);
//  2. the job's synchronizes (loss.item(), logging, optimizer checks) recur at the same point of the step: of
//     the synchronizes inside the detected steps, at least kMinSyncsInPhase have one in the next step that has
//     any at the same offset (within kSyncPhaseTolerance of the step, as a share of each step's span or as time
//     since each step's start: the span of a short step varies by the CPU's time after the synchronize). A "step" that is a layer, one kernel or
//     a period of the model's initialisation puts the job's synchronizes at drifting offsets. Checked only where
//     at least kMinSyncsForPhase synchronizes have a later step to compare with, and only where a match by
//     chance is unlikely (at most kMaxChanceMatch with the synchronizes per step seen): with hundreds per step
//     (Megatron-LM) an offset always matches, which proves nothing.
// A step that fails is never planned for: the caller keeps learning (docs/runtime.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/iteration.hpp"

namespace gearshift::runtime {

inline constexpr double kMaxLiveStepDisagreement = 0.10;  // |modelled - wall| / wall
inline constexpr std::size_t kMinSyncsForPhase = 4;        // fewer: no synchronize evidence either way
inline constexpr double kSyncPhaseTolerance = 0.03;        // of the step period
inline constexpr double kMinSyncsInPhase = 0.5;            // share of the synchronizes checked
inline constexpr double kMaxChanceMatch = 0.5;             // chance of a match at random offsets

struct LiveStepCheck {
  bool passed = false;
  std::string why;                  // why it failed, plain words (empty when passed)
  std::string evidence;             // what was measured, one line
  double modelled_step_ns = 0;      // ns
  double wall_period_ns = 0;        // ns; 0 when fewer than two steps
  std::size_t syncs_in_steps = 0;   // synchronizes that returned inside the detected steps
  std::size_t syncs_checked = 0;    // of those, with a later step with synchronizes to compare with
  std::size_t syncs_in_phase = 0;   // of those, at the same offset in that step
  bool phase_checked = false;       // test 2 applied (enough synchronizes, few per step)
};

// `steps`: the detection on the collected trace (times CLOCK_MONOTONIC ns); `modelled_step_ns`: the baseline
// step the planner simulated for it, ns (> 0); `sync_exit_ns`: the job's synchronizes (their return times,
// CLOCK_MONOTONIC ns, any order); `template_steps`: the template was built from the latest this many of `steps`
// (0, or not fewer than two and fewer than all: every step), whose wall period test 1 compares with; test 2
// looks at every step. Never throws for valid analyses; fewer than two steps fail.
LiveStepCheck check_live_step(const trace::IterationAnalysis& steps, double modelled_step_ns,
                              std::vector<std::int64_t> sync_exit_ns, std::size_t template_steps = 0);

}  // namespace gearshift::runtime
