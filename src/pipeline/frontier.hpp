// The iteration time–energy frontier of one pipeline (Perseus, Chung et al., SOSP'24 §4), computed by
// unit-step Phillips–Dessouky crashing (Phillips & Dessouky, Management Science 23(11), 1977):
// start from every operation at its slowest duration; at each step find, by a minimum s–t cut over the
// critical subnetwork only, the cheapest set of critical operations to speed up by one unit (and of others to
// slow down by one unit for a refund) that shortens every critical path by exactly one unit; repeat until a
// critical path has every operation at its fastest duration.
//
// Energy of a point with makespan T units (data README §3.3):
//   E(T) = Σ_i f_i(d_i) + gpus · T · u · P      [J]
// where f_i are convex non-increasing per-operation costs [J] on integer durations d_i [units].
// Cut capacities are integers in µJ (costs floored to 1e-6 J; +1 µJ on the speed-up cost of an operation
// strictly inside its range, which breaks ties against useless speed-up/slow-down pairs).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace gearshift::pipeline {

// f(d) for d = q_min .. q_min + cost.size() − 1 [J].
struct CostTable {
  int q_min = 0;
  std::vector<double> cost;
  int q_max() const { return q_min + static_cast<int>(cost.size()) - 1; }
  double at(int d) const { return cost[static_cast<std::size_t>(d - q_min)]; }
};

// Max-flow engine for the per-step cut. Both give the same cut (the minimal source side is unique).
//  kWarm:    one network kept over all steps, its flow and search trees updated incrementally (warm_flow.hpp);
//            the default, fast.
//  kBoostBk: Boost.Graph's Boykov–Kolmogorov from scratch every step; the cross-check.
enum class CutEngine { kWarm, kBoostBk };

struct FrontierInput {
  int num_ops = 0;
  std::vector<std::pair<int, int>> edges;  // finish-to-start, zero lag; must be acyclic
  std::vector<CostTable> costs;            // one per operation, convex non-increasing
  int gpus = 1;                            // GPUs charged blocking power for the whole iteration
  double unit_s = 1e-3;                    // time unit u [s]
  double blocking_power_w = 0;             // P [W] per GPU
  CutEngine engine = CutEngine::kWarm;
};

struct FrontierPoint {
  int T = 0;              // makespan [units]
  double compute_j = 0;   // Σ f_i(d_i) [J]
  double energy_j = 0;    // compute_j + gpus·T·u·P [J]
};

struct Frontier {
  double unit_s = 1e-3;
  int gpus = 1;
  double blocking_power_w = 0;
  // points[0] is the all-slowest start (T_max); then one point per solver step, T strictly decreasing, the
  // last at T_min. The Perseus reference CSVs hold points[1..] (they omit the start).
  std::vector<FrontierPoint> points;
  std::vector<int> initial;                               // durations at points[0]
  std::vector<std::vector<std::pair<int, int>>> changes;  // changes[k]: (op, ±1) from points[k] to points[k+1]
  std::vector<int> durations_at(std::size_t point) const;  // replays the changes
  double time_s(std::size_t point) const { return points[point].T * unit_s; }
};

// Throws PipelineError on a cyclic graph or an empty cost table.
Frontier compute_frontier(const FrontierInput& in);

// Longest path (makespan) in units for the given durations.
int makespan(const FrontierInput& in, const std::vector<int>& durations);

}  // namespace gearshift::pipeline
