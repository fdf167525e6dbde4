// What a trace's meta says was measured (s/step, J/step, W: an untraced run's NVML energy counter) is the
// figure calibration fits the model to, so a meta that cannot be a measurement is bad input, not a figure:
// a non-positive or non-finite value, a number written as text (ignored, it left the plan uncalibrated without a
// word), or J/step over s/step that disagrees with avg_W (a run's total energy given per step made it 20x).
#pragma once

#include <string>

#include "trace/record.hpp"

namespace gearshift::trace {

// J/step ÷ s/step and avg_W further apart than this share of avg_W contradict each other. In the traces of
// ../shared/data/traces and data/step_traces avg_W is that quotient exactly; 10 % leaves room for an average
// taken over another window of the same run.
inline constexpr double kMeasuredPowerTolerance = 0.10;

// Throws TraceError naming `path` and the field when the meta's measured figures are not a measurement.
void check_measured(const Trace& t, const std::string& path);

}  // namespace gearshift::trace
