// A clock plan for one training step: the locked (SM, memory) clock pair requested at each template position.
#pragma once

#include <iosfwd>
#include <optional>
#include <string_view>
#include <vector>

#include "model/dvfs_model.hpp"

namespace gearshift::plan {

// How a schedule was made. The names (to_string) are what the CLI, plan.json and the reports write; they are
// parsed back only at those edges (parse_strategy), never compared as strings inside the core.
enum class Strategy {
  baseline,       // "default": the GPU's default clocks at every position (the simulator's reference)
  iteration,      // "iteration": one clock pair for the whole step
  pass,           // "pass": one pair per pass (forward, backward, optimizer)
  kernel_local,   // "kernel-local": each kernel's own best pair
  kernel_global,  // "kernel-global": MCKP over all kernels, ideal switching
  phase,          // "phase": phases under a switch latency (dynamic programming)
};
const char* to_string(Strategy s);
// A planning strategy's name (every name above but "default"); none for any other text.
std::optional<Strategy> parse_strategy(std::string_view name);
std::ostream& operator<<(std::ostream& out, Strategy s);  // its name, for test messages

struct Schedule {
  Strategy strategy = Strategy::baseline;
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
