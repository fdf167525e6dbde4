// The CPU side of a detected step: the synchronizes its CPU thread calls, placed in the step's CPU timeline so
// that the dependency-driven replay (sim/simulator.hpp) can make the CPU wait where it waited.
//
// Step k's CPU window runs from the earliest launch of its ops to the earliest launch of step k+1's (the last
// step: one period on). The synchronizes entered in a regular step's window are its synchronizes; the steps'
// i-th synchronizes are averaged (offsets relative to the step's GPU start, as the launch offsets are) when most
// regular steps call the same number of them, else none are kept and `cpu_note` says why.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::trace {

// Where one regular step launched the template's main-stream positions (steps of unequal length).
struct StepLaunches {
  std::size_t step = 0;  // index into IterationAnalysis::iterations
  // (CPU launch time ns, main-stream position: the position-th op of the template's main stream), by time
  std::vector<std::pair<std::int64_t, std::uint32_t>> launches;
};

// Fills a.tmpl.syncs, syncs_known and cpu_note. Needs the template's launch offsets (launch_known).
//
// Steps of equal length (`by_position` null): the steps' i-th synchronizes, averaged, as above.
// Steps of unequal length (update-delimited: the template's offsets are laid out from mean durations and gaps,
// trace/step/template.cpp), `by_position` given: a synchronize is placed by the main-stream position the CPU launched
// last before entering it, not by its time in the step. Those that recur (same position, same order after it)
// in more than half of the steps are kept: entered their mean CPU time after that launch (and before the next
// main-stream launch), and, where the CPU waited for the GPU in most steps, returning their mean return latency
// after the laid-out end of the work launched before them; otherwise lasting their mean own cost.
void attach_cpu_timeline(const Trace& trace, IterationAnalysis& a, const std::vector<StepLaunches>* by_position = nullptr);

}  // namespace gearshift::trace
