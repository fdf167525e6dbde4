// Replays one training step's template under a clock schedule with the DVFS model.
//
// Timeline, where the template knows its launches (graph/step_graph.hpp): the dependency-driven replay. Each op
// starts at max(its launch + launch latency, its stream predecessor's end + dispatch gap); the CPU thread's
// launches move only where a synchronize waited longer or shorter for the GPU. Steps are replayed one after
// another (each from the state the one before left) until the step length repeats; the figures are that
// step's, from its first position's start to the next step's. Energy counts its ops' dynamic energy and the
// board's idle power over the step at the clocks in effect (a change lands for the board when it lands).
//
// Fallback timeline (no launch events; `SimResult::dependency_replay` false): each op starts when its stream is free plus its recorded idle gap (CPU-bound launch time, which
// does not scale with the GPU clock), and never before the op ahead of it in the template starts (launch
// order). The schedule holds the clocks each position should run at. A change to position k's clocks is
// issued L before op k starts (as the runtime's scheduler does, from the template's offsets) and lands when
// op k starts — unless the previous change landed less than L before: one change is in flight at a time (a
// clock set takes L), so it is issued when the previous one lands and lands L later; ops starting in between
// run at the old clocks (a late change, counted). A plan whose phases all last at least L therefore runs
// exactly as with instant switching (L = 0); only shorter phases pay.
// The step repeats: position 0 starts under the clocks the previous step ended with, and a change still in
// flight at the step's end lands in the next step (the step is replayed once more in steady state then).
// Ops run at the clocks in effect when they start, lowered by the power cap; the board's idle power follows
// the same clocks: from one op's start to the next op's start it is the idle power of the clocks the first
// of them started with (a change lands for the board when it lands for the ops).
// Energy = Σ (op power − idle power at its capped clock)·op time + ∫ idle power(requested clocks in effect) dt
//          + Σ over the board's gaps D·τ·(1 − exp(−G/τ)): once no op runs, the board's power falls from the last
//          op's (D W above idle, at the default clocks: measured only there) to idle with time constant τ
//          (PowerParams::gap_decay_ns; measured on an H200: a gap of 0.14-1.06 ms after a kernel drew 0.03-0.09 ms
//          of its power above idle, data/gpus/h200.json). A plan thus saves nothing on the falls.
// Limits: the power cap is applied per op (overlapping ops on other streams are not summed against it).
#pragma once

#include <vector>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "plan/schedule.hpp"
#include "graph/step_graph.hpp"

namespace gearshift::sim {

struct TimelineEntry {
  std::size_t position = 0;
  double start_ns = 0, end_ns = 0;  // relative to the step start, ns
  model::ClockPair requested;       // clocks in effect (requested) when it started
  int effective_sm_mhz = 0;         // after power capping, MHz
  double power_w = 0;               // W
};

struct SimResult {
  double step_time_ns = 0;  // ns
  double energy_j = 0;      // J per step
  double average_power_w = 0;
  std::size_t clock_changes = 0;     // changes issued per step
  std::size_t late_changes = 0;      // changes that landed after their op started (previous change < L before)
  double busy_time_ns = 0;           // Σ op times, ns
  double gap_tail_j = 0;             // J of energy_j: the board's power falling to idle in its gaps
  std::vector<TimelineEntry> timeline;  // filled when requested
  bool dependency_replay = false;    // the dependency-driven replay ran (else the fallback rule)
  // Per position, with the timeline and the dependency replay: free float, ns (how much longer the op may run
  // before anything after it moves; graph/step_graph.hpp).
  std::vector<double> slack_ns;
};

SimResult simulate(const model::Workload& w, const model::DvfsModel& m, const plan::Schedule& s,
                   double switch_latency_ns, bool keep_timeline = false);
// The same on a graph already built from `w` (build_step_graph(w)), for callers that simulate often.
// `end_floor_ns` (dependency replay only; sim/collectives.hpp): per position, the earliest time the op may end,
// relative to its step's start (its first position's start), ns; -inf: none. An op that would end earlier
// waits (a collective waiting for the slowest rank) at its running power. Throws std::invalid_argument for a
// schedule, graph or floors of another number of positions, and floors without the dependency replay.
SimResult simulate(const model::Workload& w, const graph::StepGraph& g, const model::DvfsModel& m, const plan::Schedule& s,
                   double switch_latency_ns, bool keep_timeline = false,
                   const std::vector<double>* end_floor_ns = nullptr);

// The schedule that leaves the GPU at its default clocks (the baseline).
plan::Schedule default_schedule(const model::Workload& w, const model::DvfsModel& m);

}  // namespace gearshift::sim
