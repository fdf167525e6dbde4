// Replays one training step's template under a clock schedule with the DVFS model.
//
// Timeline: each op starts when its stream is free plus its recorded idle gap (CPU-bound launch time, which
// does not scale with the GPU clock), and never before the op ahead of it in the template starts (launch
// order). A change of requested clocks at position i is issued when op i would start and lands L later; until
// then the old clocks hold (the transition window). The step repeats: position 0 starts under the clocks the
// previous step ended with. Ops run at the clocks in effect when they start, lowered by the power cap.
// Energy = Σ (op power − idle power)·op time + ∫ idle power(clock in effect) dt over the step.
// Limits: the power cap is applied per op (overlapping ops on other streams are not summed against it).
#pragma once

#include <vector>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "plan/schedule.hpp"

namespace gearshift::sim {

struct TimelineEntry {
  std::size_t position = 0;
  double start_ns = 0, end_ns = 0;  // relative to the step start, ns
  model::ClockPair requested;       // clocks in effect (requested) when it started
  int effective_sm_mhz = 0;         // after power capping, MHz
  double power_w = 0;               // W
};

struct SimResult {
  double step_time_s = 0;   // s
  double energy_j = 0;      // J per step
  double average_power_w = 0;
  std::size_t clock_changes = 0;     // changes issued per step
  double busy_time_s = 0;            // Σ op times, s
  std::vector<TimelineEntry> timeline;  // filled when requested
};

SimResult simulate(const model::Workload& w, const model::DvfsModel& m, const plan::Schedule& s,
                   double switch_latency_ns, bool keep_timeline = false);

// The schedule that leaves the GPU at its default clocks (the baseline).
plan::Schedule default_schedule(const model::Workload& w, const model::DvfsModel& m);

}  // namespace gearshift::sim
