// A clock plan for one training step: the locked (SM, memory) clock pair requested at each template position.
#pragma once

#include <string>
#include <vector>

#include "model/dvfs_model.hpp"

namespace gearshift::plan {

struct Schedule {
  std::string strategy;                 // "iteration", "pass", "kernel-local", "kernel-global", "phase"
  double switch_latency_ns = 0;         // L the plan was made for, ns (0: ideal switching)
  std::vector<model::ClockPair> clocks; // per template position
  double optimality_gap = -1;           // relative gap to a proven lower bound (kernel-global), -1 if none

  // Positions where the requested clocks differ from the previous position's (cyclic: position 0 compares
  // with the last position, as the step repeats).
  std::vector<std::size_t> change_positions() const;
};

// A contiguous run of positions with one clock pair.
struct Phase {
  std::size_t first = 0, last = 0;  // template positions, inclusive
  model::ClockPair clocks;
};
std::vector<Phase> phases_of(const Schedule& s);

}  // namespace gearshift::plan
