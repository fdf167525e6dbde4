// The CPU side of a detected step: the synchronizes its CPU thread calls, placed in the step's CPU timeline so
// that the dependency-driven replay (sim/simulator.hpp) can make the CPU wait where it waited.
//
// Step k's CPU window runs from the earliest launch of its ops to the earliest launch of step k+1's (the last
// step: one period on). The synchronizes entered in a regular step's window are its synchronizes; the steps'
// i-th synchronizes are averaged (offsets relative to the step's GPU start, as the launch offsets are) when most
// regular steps call the same number of them, else none are kept and `cpu_note` says why.
#pragma once

#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::trace {

// Fills a.tmpl.syncs, syncs_known and cpu_note. Needs the template's launch offsets (launch_known). Steps of
// unequal length (update-delimited: their offsets are laid out, trace/iteration.cpp) get no synchronizes.
void attach_cpu_timeline(const Trace& trace, IterationAnalysis& a);

}  // namespace gearshift::trace
