#include "plan/strategies.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "plan/mckp.hpp"

namespace gearshift::plan {

double total_time_ns(const ClockTable& t, std::size_t c) {
  double s = 0;
  for (std::size_t i = 0; i < t.ops; ++i) s += t.budget(i, c);
  return s;
}

Schedule plan_iteration(const ClockTable& t, double budget) {
  const std::size_t nc = t.clocks.size();
  std::vector<double> time(nc, 0), energy(nc, 0);
  for (std::size_t i = 0; i < t.ops; ++i)
    for (std::size_t c = 0; c < nc; ++c) time[c] += t.budget(i, c), energy[c] += t.energy(i, c);
  MckpInstance in{1, nc, time.data(), energy.data()};
  MckpResult r = solve_mckp_brute_force(in, budget);
  std::size_t c = r.feasible ? r.choice[0] : t.default_index;
  return Schedule{Strategy::iteration, 0, std::vector<model::ClockPair>(t.ops, t.clocks[c]), 0};
}

Schedule plan_pass(const ClockTable& t, const model::Workload& w, double budget) {
  const std::size_t nc = t.clocks.size();
  std::vector<double> time(3 * nc, 0), energy(3 * nc, 0);
  for (std::size_t i = 0; i < t.ops; ++i) {
    auto p = static_cast<std::size_t>(w.ops[i].pass);
    for (std::size_t c = 0; c < nc; ++c) time[p * nc + c] += t.budget(i, c), energy[p * nc + c] += t.energy(i, c);
  }
  // Exact: Pareto-filter each pass, enumerate forward × backward, look the optimizer pass up by time.
  auto pareto = [&](std::size_t p) {
    std::vector<std::size_t> idx(nc);
    for (std::size_t c = 0; c < nc; ++c) idx[c] = c;
    std::sort(idx.begin(), idx.end(), [&](auto a, auto b) {
      return time[p * nc + a] != time[p * nc + b] ? time[p * nc + a] < time[p * nc + b] : energy[p * nc + a] < energy[p * nc + b];
    });
    std::vector<std::size_t> out;  // increasing time, strictly decreasing energy
    for (auto c : idx)
      if (out.empty() || energy[p * nc + c] < energy[p * nc + out.back()]) out.push_back(c);
    return out;
  };
  std::array<std::vector<std::size_t>, 3> front = {pareto(0), pareto(1), pareto(2)};
  double best = std::numeric_limits<double>::infinity();
  std::array<std::size_t, 3> choice = {t.default_index, t.default_index, t.default_index};
  for (auto a : front[0])
    for (auto b : front[1]) {
      double rem = budget - time[a] - time[nc + b];
      // largest-time (cheapest) optimizer option with time <= rem
      const auto& f = front[2];
      auto it = std::upper_bound(f.begin(), f.end(), rem, [&](double v, std::size_t c) { return v < time[2 * nc + c]; });
      if (it == f.begin()) continue;
      std::size_t c = *std::prev(it);
      double e = energy[a] + energy[nc + b] + energy[2 * nc + c];
      if (e < best) best = e, choice = {a, b, c};
    }
  Schedule s{Strategy::pass, 0, {}, 0};
  for (std::size_t i = 0; i < t.ops; ++i) s.clocks.push_back(t.clocks[choice[static_cast<std::size_t>(w.ops[i].pass)]]);
  return s;
}

Schedule plan_kernel_local(const ClockTable& t, double eps) {
  Schedule s{Strategy::kernel_local, 0, {}, -1};
  for (std::size_t i = 0; i < t.ops; ++i) {
    double limit = t.time(i, t.default_index) * (1 + eps);
    std::size_t best = t.default_index;
    for (std::size_t c = 0; c < t.clocks.size(); ++c)
      if (t.time(i, c) <= limit && t.energy(i, c) < t.energy(i, best)) best = c;
    s.clocks.push_back(t.clocks[best]);
  }
  return s;
}

Schedule plan_kernel_global(const ClockTable& t, double budget, double* lower_bound_j) {
  return KernelGlobalPlanner(t).plan(budget, lower_bound_j);
}

KernelGlobalPlanner::KernelGlobalPlanner(const ClockTable& t)
    : t_(t), solver_(MckpInstance{t.ops, t.clocks.size(), t.budget_data(), t.energy_j.data()}) {}

Schedule KernelGlobalPlanner::plan(double budget, double* lower_bound_j) {
  const ClockTable& t = t_;
  MckpResult r = solver_.solve(budget);
  if (lower_bound_j) *lower_bound_j = r.feasible ? r.lower_bound : -1;
  Schedule s{Strategy::kernel_global, 0, {}, r.gap};
  for (std::size_t i = 0; i < t.ops; ++i) s.clocks.push_back(t.clocks[r.feasible ? r.choice[i] : t.default_index]);
  return s;
}

}  // namespace gearshift::plan
