// Data-parallel ranks replayed together: an NCCL collective ends when the slowest rank's matching collective can
// end (graph/step_graph.hpp's rule for collectives when the ranks' traces are given; one rank: as traced).
//
// The ranks' c-th communication ops are one collective (every rank of a data-parallel job issues the same
// collectives in the same order; their other kernels may differ, so positions are not matched). A traced
// collective's time holds its wait for the other ranks, so its transfer is the least of the ranks' traced times
// for it; a rank's collective can end at its own start plus that transfer (at its clocks), and ends at the latest
// such end over the ranks (relative to each rank's step start: the collectives of the step before align them).
// Replayed to a fixed point (each round can only move the ends later; at most kMaxCollectiveRounds).
#pragma once

#include <vector>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "plan/schedule.hpp"
#include "sim/simulator.hpp"

namespace gearshift::sim {

inline constexpr int kMaxCollectiveRounds = 32;

struct RankReplay {
  const model::Workload* workload = nullptr;  // the rank's traced template (with launch events)
  const model::DvfsModel* model = nullptr;
  plan::Schedule schedule;
};

struct RanksResult {
  std::vector<SimResult> ranks;   // per rank, timelines kept
  double job_step_time_ns = 0;    // the slowest rank's step, ns
  int rounds = 0;                 // replays of every rank until the ends held
};

// Throws std::invalid_argument for no rank, a rank without launch events (no dependency replay) or ranks that
// do not issue the same number of collectives.
RanksResult simulate_ranks(const std::vector<RankReplay>& ranks, double switch_latency_ns);

}  // namespace gearshift::sim
