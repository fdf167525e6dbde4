// Clock-planning strategies for one training step (docs/design.md; Spaan et al., arXiv 2601.08539 for the
// iteration/pass/kernel-local/kernel-global family). Each returns the clocks per template position.
//
// Budgets are on the serial sum of op times: `time_budget_ns` = Σ baseline op times + ε·baseline step time;
// energies are the table's, which on one stream are the simulator's with instant switching (clock_table.hpp).
// The simulator checks every plan against the real step-time budget (streams, gaps, switching) afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/workload.hpp"
#include "plan/clock_table.hpp"
#include "plan/mckp.hpp"
#include "plan/schedule.hpp"

namespace gearshift::plan {

// Σ of op times at `clock_index` for every op, ns.
double total_time_ns(const ClockTable& t, std::size_t clock_index);

// One clock pair for the whole step: the minimum-energy pair whose total time fits.
Schedule plan_iteration(const ClockTable& t, double time_budget_ns);

// One clock pair per pass (forward, backward, optimizer): exact search over the three passes' Pareto sets.
Schedule plan_pass(const ClockTable& t, const model::Workload& w, double time_budget_ns);

// Each op at its minimum-energy pair whose time is <= its own baseline time · (1 + eps).
Schedule plan_kernel_local(const ClockTable& t, double eps);

// Minimum total energy subject to total time <= budget (multiple-choice knapsack, proven gap in the result;
// `lower_bound_j`, when given, receives the proven lower bound on the table energy of any plan that fits).
Schedule plan_kernel_global(const ClockTable& t, double time_budget_ns, double* lower_bound_j = nullptr);

// plan_kernel_global kept for several budgets on one table (a frontier, re-planning): the knapsack's hulls are
// made once. `t` must outlive it.
class KernelGlobalPlanner {
 public:
  explicit KernelGlobalPlanner(const ClockTable& t);
  Schedule plan(double time_budget_ns, double* lower_bound_j = nullptr);

 private:
  const ClockTable& t_;
  MckpSolver solver_;
};

// Phases under switching latency L (the simulator's semantics, sim/simulator.hpp): a phase's change is
// issued L before its first op and lands as that op starts, one change in flight at a time, so every phase
// lasts at least L (on the table's fastest timeline). Dynamic programming over positions × clock pairs with a
// Lagrangian time price λ, bisected until the time budget holds; the least-energy plan that fits among every
// λ tried is returned. A plan for L is also one for any shorter latency, and with L = 0 it is a kernel plan.
Schedule plan_phase(const ClockTable& t, const model::Workload& w, double time_budget_ns, double switch_latency_ns);

// The phase DP's working memory (4 to 12 bytes per position and clock pair, the most for long latencies), which
// planners used one at a time may share: evaluate() keeps a planner per latency, and their own copies were most
// of its peak memory.
struct PhaseScratch {
  std::vector<double> prefix, rows;
  std::vector<std::uint32_t> came_from;
};

// The same planner kept for several budgets (a frontier, re-planning): the DP's solutions per λ are shared.
class PhasePlanner {
 public:
  // `scratch`: shared working memory (outlives the planner; not used by two planners at once), null: its own.
  PhasePlanner(const ClockTable& t, double switch_latency_ns, PhaseScratch* scratch = nullptr);
  ~PhasePlanner();
  PhasePlanner(PhasePlanner&&) noexcept;
  // `lambda_hint`: a time price to start from (e.g. last_lambda() of another latency's planner), J/ns.
  Schedule plan(double time_budget_ns, double lambda_hint = -1);
  double last_lambda() const { return last_lambda_; }  // λ of the plan the last plan() returned

  struct Result {
    std::vector<std::size_t> clock;  // clock index per position
    double time_ns = 0, energy_j = 0;  // the table's sums (budget time, energy)
    std::size_t end_clock = 0;
  };
  const Result& solve(double lambda);  // the cyclic DP plan minimising Σ E + λ·T

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  double latency_ns_ = 0;
  double last_lambda_ = -1;
};

}  // namespace gearshift::plan
