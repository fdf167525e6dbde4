// The board's idle gaps in one step: the time from the end of the op that leaves the GPU with nothing to run to
// the next op's start. The simulator and the planner's clock table charge each such gap the fall of the board's
// power from that op's power to idle (model::DvfsModel::gap_tail_ns).
#pragma once

#include <vector>

namespace gearshift::graph {

// Per op, the board gap that follows it, ns: > 0 only for the op whose end starts a gap (the op ending last
// before it; ops on other streams may overlap). `start_ns`, `end_ns` per op of one step (any order, same
// clock); `next_start_ns` is when the next step's first op starts (the gap after the step's last end runs to
// it). Throws std::invalid_argument when the sizes differ.
std::vector<double> board_gaps_after_ns(const std::vector<double>& start_ns, const std::vector<double>& end_ns,
                                        double next_start_ns);

}  // namespace gearshift::graph
