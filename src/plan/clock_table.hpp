// Predicted time and energy of every template op at every supported (SM clock, memory clock) pair: the table
// all kernel/phase strategies search. Serial view: an op's energy is its board power (idle + dynamic, capped)
// times its time; the simulator later replays streams, gaps and switching.
#pragma once

#include <vector>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"

namespace gearshift::plan {

struct ClockTable {
  std::vector<model::ClockPair> clocks;  // candidate pairs: every supported SM clock × memory clock
  std::size_t ops = 0;
  std::vector<double> time_ns;   // [op * clocks.size() + c], ns
  std::vector<double> energy_j;  // [op * clocks.size() + c], J
  std::size_t default_index = 0; // index of the default (unlocked) pair

  double time(std::size_t op, std::size_t c) const { return time_ns[op * clocks.size() + c]; }
  double energy(std::size_t op, std::size_t c) const { return energy_j[op * clocks.size() + c]; }
};

// Candidate clocks: all supported SM clocks (optionally only those >= min_sm_mhz) × all memory clocks.
ClockTable build_clock_table(const model::Workload& w, const model::DvfsModel& m, int min_sm_mhz = 0);

}  // namespace gearshift::plan
