// Clock-planning strategies for one training step (DESIGN.md; Spaan et al., arXiv 2601.08539 for the
// iteration/pass/kernel-local/kernel-global family). Each returns the clocks per template position.
//
// Budgets are on the serial sum of op times: `time_budget_ns` = Σ baseline op times + ε·baseline step time.
// The simulator checks every plan against the real step-time budget (streams, gaps, switching) afterwards.
#pragma once

#include "model/workload.hpp"
#include "plan/clock_table.hpp"
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

// Minimum total energy subject to total time <= budget (multiple-choice knapsack, proven gap in the result).
Schedule plan_kernel_global(const ClockTable& t, double time_budget_ns);

// Phases under switching latency L: a change requested at a position lands L later (the old clocks hold in
// between), so changes are at least L apart. Dynamic programming over positions × clock pairs with a
// Lagrangian time price λ, bisected until the time budget holds.
Schedule plan_phase(const ClockTable& t, const model::Workload& w, double time_budget_ns, double switch_latency_ns);

}  // namespace gearshift::plan
