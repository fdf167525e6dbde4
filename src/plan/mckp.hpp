// Multiple-choice knapsack: pick one option per group to minimise total energy subject to total time <= budget.
//
// Method: each group's options are reduced to their lower convex hull in (time, energy); starting from every
// group's minimum-energy option, hull segments are taken in increasing order of their marginal cost
// ΔE/ΔT (J per ns saved) until the time budget holds. This is the optimum of the LP relaxation except for the
// last segment, which the integer solution takes whole; the LP value (the last segment taken fractionally) is
// a proven lower bound on the integer optimum (Sinha & Zoltners, Operations Research 1979). A repair pass
// then spends the remaining slack on the largest energy reductions among all options. Last, a branch and
// bound with the LP's time price λ (reduced-cost fixing: an option whose e + λ·t exceeds its group's least by
// more than the incumbent's gap cannot be in a better solution) searches the groups left with several
// options; when it ends within its node limit the solution is proven optimal (gap 0), which it is on small
// instances; on a training step's thousands of ops it stops at the limit and the gap says how far from
// optimal it can be. The returned gap is (energy − lower bound) / lower bound.
#pragma once

#include <cstddef>
#include <vector>

namespace gearshift::plan {

struct MckpInstance {
  std::size_t groups = 0, options = 0;  // every group has the same number of options
  const double* time = nullptr;         // [group * options + option], any unit (ns here)
  const double* energy = nullptr;       // [group * options + option], J
};

struct MckpResult {
  std::vector<std::size_t> choice;  // option per group
  double time = 0, energy = 0;      // totals of the choice
  double lower_bound = 0;           // proven lower bound on the optimal energy
  double gap = 0;                   // (energy − lower_bound) / lower_bound, >= 0
  bool feasible = true;             // false: even the fastest options exceed the budget (choice = fastest)
};

MckpResult solve_mckp(const MckpInstance& in, double budget);

// solve_mckp for several budgets on one instance: the groups' hulls and the segments in slope order do not
// depend on the budget, so they are made once (they dominated a frontier's kernel-global plans). The instance's
// arrays must outlive the solver. solve(b) == solve_mckp(in, b).
class MckpSolver {
 public:
  explicit MckpSolver(const MckpInstance& in);
  MckpResult solve(double budget);

 private:
  struct Segment {
    double slope;  // J per unit time saved
    std::size_t group, to_rank;
  };
  MckpInstance in_;
  std::vector<std::vector<std::size_t>> hulls_;
  std::vector<Segment> segs_;
  bool segs_sorted_ = false;  // sorted on the first budget the minimum-energy choice misses
  std::vector<std::size_t> min_energy_choice_;
  double min_energy_time_ = 0, min_energy_ = 0;
};

// Exhaustive optimum for tiny instances (tests): options^groups combinations.
MckpResult solve_mckp_brute_force(const MckpInstance& in, double budget);

}  // namespace gearshift::plan
