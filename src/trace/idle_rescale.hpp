// A step template re-timed to another step length by scaling its idle time only.
//
// `gearshift run --auto` learns the step while CUPTI records every kernel's activity. On a launch-bound job that
// recording slows the CPU (measured on an H200: a Mixtral-like MoE's warm-up steps 60 % longer than its untraced
// ones), so the GPU waits longer between kernels; the kernels themselves run as fast (their durations are GPU
// timestamps). Once the untraced step length is measured (its launch rate), the template's idle time is scaled
// so that its step has that length: every moment of the step where no op of the template runs on any stream is
// stretched or shrunk by one factor, busy time is left alone, and each op's start offset and gap, its launch
// offset and the step's synchronizes are mapped through that time map (docs/runtime.md, "the untraced step").
#pragma once

#include <stdexcept>
#include <utility>
#include <vector>

#include "trace/iteration.hpp"

namespace gearshift::trace {

// The union of the intervals [first, second) (empty ones dropped), sorted and merged, ns. Shared with the model's
// power-limit window (model/workload.cpp).
std::vector<std::pair<double, double>> merged_intervals(std::vector<std::pair<double, double>> iv);

// Busy time of one template step: the union of its ops' [start, start + duration) clipped to [0, period), ns.
double template_busy_ns(const IterationTemplate& t);

// Re-times `t` to a step of `step_ns` (> 0): idle time scaled by (step_ns - busy) / (period - busy), start
// offsets and gaps mapped accordingly, period_ns = step_ns; durations unchanged. Throws std::invalid_argument when
// step_ns is shorter than the busy time (the traced kernels alone take longer than the step: their times are not
// this job's), or when the template has no idle time to scale and step_ns differs from its period.
void rescale_idle(IterationTemplate& t, double step_ns);

}  // namespace gearshift::trace
