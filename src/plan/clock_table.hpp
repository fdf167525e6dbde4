// Predicted time and energy of every template op at every supported (SM clock, memory clock) pair: the table
// all kernel/phase strategies search. It is the simulator's account with instant switching (sim/simulator.hpp),
// split per op: an op's energy is its dynamic energy (board power above the idle power of its capped clock,
// times its time) plus the idle power of its clocks from its start to the next op's start (its own time plus
// the idle gap after it; the last op also holds the step's tail and the first op's gap). On one stream the
// sums over a plan equal the simulated step energy and, with the gaps, the simulated step time exactly; where
// several streams overlap, an interval that ends on another stream is taken from the baseline timeline, and
// the budget counts slow-downs only (budget_ns). Where the template knows its launches (graph/step_graph.hpp),
// the timelines are the dependency-driven replay's and an op's slow-down within its free float costs no budget.
#pragma once

#include <vector>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "graph/step_graph.hpp"

namespace gearshift::plan {

struct ClockTable {
  std::vector<model::ClockPair> clocks;  // candidate pairs: every supported SM clock × memory clock
  std::size_t ops = 0;
  std::vector<double> time_ns;   // [op * clocks.size() + c], ns
  std::vector<double> energy_j;  // [op * clocks.size() + c], J (dynamic + idle up to the next op's start)
  // [op * clocks.size() + c], ns: what the op costs of the step-time budget. On one stream its time (the step
  // is Σ times + gaps). With several streams the step is a longest path, which grows by at most the sum of its
  // ops' slow-downs: the op's default time plus its slow-down only (a faster op earns nothing), so that a plan
  // within the budget is within it in the simulator too.
  std::vector<double> budget_ns;
  std::size_t default_index = 0; // index of the default (unlocked) pair
  // Op starts at default clocks (the baseline timeline, ns) and with every op at its fastest pair: a phase
  // that lasts L on the fastest timeline lasts at least L under any clocks (on one stream).
  std::vector<double> start_ns, fastest_start_ns;
  double step_ns = 0, fastest_step_ns = 0;  // step time on those timelines (tail included), ns
  bool single_stream = true;                // every op on one stream: the sums are the simulator's exactly
  // Per op, where the template is a dependency graph (graph/step_graph.hpp): its free float on the baseline
  // timeline, ns. budget_ns lets it spend that at no cost, or its share of a stream chain's float (ops that
  // each start as the one before ends share the last one's), so work followed by a wait is slowed first.
  // Empty: the fallback timeline, no float counted.
  std::vector<double> slack_ns;
  // Per op: 1 where a clock change may land (a launch unit's start, trace/graph_units.hpp), 0 inside a CUDA
  // graph launch. Empty (a hand-made table): everywhere.
  std::vector<std::uint8_t> may_change;

  double time(std::size_t op, std::size_t c) const { return time_ns[op * clocks.size() + c]; }
  double energy(std::size_t op, std::size_t c) const { return energy_j[op * clocks.size() + c]; }
  // budget_ns, or time_ns when a hand-made table leaves it empty.
  const double* budget_data() const { return budget_ns.empty() ? time_ns.data() : budget_ns.data(); }
  double budget(std::size_t op, std::size_t c) const { return budget_data()[op * clocks.size() + c]; }
};

// Candidate clocks: all supported SM clocks (optionally only those >= min_sm_mhz) × all memory clocks.
// `graph`: the step graph to replay (graph/step_graph.hpp) when not `w`'s own (a template whose op times were
// changed, such as a rank's without its wait, keeps its traced graph); null: build_step_graph(w). Throws
// std::invalid_argument for a graph of another number of positions.
ClockTable build_clock_table(const model::Workload& w, const model::DvfsModel& m, int min_sm_mhz = 0,
                             const graph::StepGraph* graph = nullptr);

// Op starts and step end (tail included) for given op durations: sim::simulate's timeline recurrence (an op
// starts when its stream is free plus its gap, never before the op ahead of it in the template starts).
std::vector<double> op_starts_ns(const model::Workload& w, const std::vector<double>& durations_ns, double* step_ns);

}  // namespace gearshift::plan
