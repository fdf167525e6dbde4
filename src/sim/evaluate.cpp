#include "sim/evaluate.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>

#include "plan/clock_table.hpp"
#include "plan/strategies.hpp"

namespace gearshift::sim {

model::PowerParams calibrate_to_measured_power(model::Workload& w, model::DvfsModel& m, double measured_w) {
  if (!(measured_w > 0)) throw std::invalid_argument("calibration needs a positive measured average power");
  const auto& spec = m.spec();
  auto power_with = [&](const model::PowerParams& p) {
    m.set_params(p);
    model::refresh_reference_clocks(w, m);
    return simulate(w, m, default_schedule(w, m), 0).average_power_w;
  };
  auto with_memory = [&](double mem_w) { return model::power_params_for(spec, mem_w); };
  double lo = 0, hi = spec.max_board_power_w;
  if (power_with(with_memory(lo)) <= measured_w && power_with(with_memory(hi)) >= measured_w) {
    for (int k = 0; k < 50; ++k) {
      double mid = 0.5 * (lo + hi);
      (power_with(with_memory(mid)) < measured_w ? lo : hi) = mid;
    }
    // Capped clocks move in supported steps, so the power can jump where the bisection ends: keep the side
    // nearer the measured power.
    const double below = power_with(with_memory(lo)), above = power_with(with_memory(hi));  // `m` left at hi
    if (measured_w - below <= above - measured_w) power_with(with_memory(lo));
    return m.params();
  }
  model::PowerParams base = with_memory(spec.memory_power_w_at_max_clock);
  auto with_scale = [&](double s) {
    model::PowerParams p = base;
    p.activity_scale = s;
    return p;
  };
  lo = 0.05, hi = 5.0;
  for (int k = 0; k < 60; ++k) {
    double mid = 0.5 * (lo + hi);
    (power_with(with_scale(mid)) < measured_w ? lo : hi) = mid;
  }
  const double below = power_with(with_scale(lo)), above = power_with(with_scale(hi));  // `m` left at hi
  if (measured_w - below <= above - measured_w) power_with(with_scale(lo));
  return m.params();
}

namespace {

using Planner = std::function<plan::Schedule(double serial_budget_ns)>;
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Context {
  const model::Workload& w;
  const model::DvfsModel& m;
  const SimResult& base;
  const plan::ClockTable& table;
  double serial_base_ns = 0;
  plan::PhaseScratch phase_scratch;             // the phase planners' working memory, one at a time
  std::map<double, plan::PhasePlanner> phase;  // per latency, shared by every budget
  std::optional<plan::KernelGlobalPlanner> kernel_global;  // shared by every budget
  plan::PhasePlanner& phase_planner(double latency_ns) {
    auto it = phase.find(latency_ns);
    if (it == phase.end()) it = phase.emplace(latency_ns, plan::PhasePlanner(table, latency_ns, &phase_scratch)).first;
    return it->second;
  }
};

bool fits(const SimResult& s, const SimResult& base, double eps) {
  return s.step_time_ns <= base.step_time_ns * (1 + eps) * (1 + 1e-12);
}

void score(StrategyResult& r, const SimResult& base) {
  r.saving_pct = (base.energy_j - r.sim.energy_j) / base.energy_j * 100;
  // From the step times in s, as always: the written figures keep their last digit (docs/design.md, Units).
  const double t_s = r.sim.step_time_ns * 1e-9, base_s = base.step_time_ns * 1e-9;
  r.slowdown_pct = (t_s - base_s) / base_s * 100;
}

// Shortest phase of `s` (cyclic), ns, on `timeline`: a simulation of `s` with instant switching or with no late
// change (the same timeline).
double shortest_phase_ns(const plan::Schedule& s, const SimResult& timeline) {
  const auto changes = s.change_positions();
  if (changes.empty()) return kInf;
  const auto& tl = timeline.timeline;
  double shortest = kInf;
  for (std::size_t k = 0; k < changes.size(); ++k) {
    const double from = tl[changes[k]].start_ns;
    const double to =
        k + 1 < changes.size() ? tl[changes[k + 1]].start_ns : tl[changes[0]].start_ns + timeline.step_time_ns;
    shortest = std::min(shortest, to - from);
  }
  return shortest;
}

// The result `r` made for instant switching, as a plan of latency L: exactly the same figures when every phase
// lasts L (the simulator confirms where the shortest phase is within rounding of L).
std::optional<SimResult> at_latency(const model::Workload& w, const model::DvfsModel& m, const StrategyResult& r,
                                    double latency_ns) {
  if (r.switch_latency_ns != 0 && r.sim.late_changes != 0) return std::nullopt;  // not even its own latency
  if (latency_ns <= 0 || latency_ns < r.shortest_phase_ns * (1 - 1e-9)) return r.sim;
  if (latency_ns > r.shortest_phase_ns * (1 + 1e-9)) return std::nullopt;
  SimResult s = simulate(w, m, r.schedule, latency_ns);
  if (s.late_changes != 0) return std::nullopt;
  return s;
}

// A phase plan with a change that lands late (a phase shorter than L on the simulated timeline, which the
// DP's fastest timeline rules out on one stream): each such phase is merged into the one before it, both at
// the higher of their clocks (what the runtime does with changes closer than L), until none is late.
// `sim`: the plan simulated at L with its timeline; updated.
void without_late_changes(const model::Workload& w, const model::DvfsModel& m, plan::Schedule& s,
                          double latency_ns, SimResult& sim) {
  for (int round = 0; round < 32 && sim.late_changes != 0; ++round) {
    SimResult ideal = simulate(w, m, s, 0, true);
    const auto changes = s.change_positions();
    const std::size_t nch = changes.size(), n = s.clocks.size();
    std::vector<bool> touched(nch, false);
    for (std::size_t k = 0; k < nch; ++k) {
      const std::size_t next = (k + 1) % nch, prev = (k + nch - 1) % nch;
      const double from = ideal.timeline[changes[k]].start_ns;
      const double to = ideal.timeline[changes[next]].start_ns + (next == 0 ? ideal.step_time_ns : 0.0);
      if (to - from >= latency_ns || touched[k] || touched[prev]) continue;
      const model::ClockPair a = s.clocks[changes[prev]], b = s.clocks[changes[k]];
      const model::ClockPair hi{std::max(a.sm_mhz, b.sm_mhz), std::max(a.mem_mhz, b.mem_mhz)};
      if (nch <= 2) {  // two phases: one is left
        std::fill(s.clocks.begin(), s.clocks.end(), hi);
        break;
      }
      for (std::size_t i = changes[prev]; i != changes[next]; i = (i + 1) % n) s.clocks[i] = hi;
      touched[k] = touched[prev] = true;
    }
    sim = simulate(w, m, s, latency_ns, true);
  }
}

StrategyResult run(Context& c, double eps, double latency_ns, const Planner& planner) {
  auto t0 = std::chrono::steady_clock::now();
  const double target_ns = c.base.step_time_ns * (1 + eps);
  double budget = c.serial_base_ns + eps * c.base.step_time_ns;
  StrategyResult r;
  auto ok = [&] {
    return r.sim.step_time_ns <= target_ns * (1 + 1e-12) && (latency_ns == 0 || r.sim.late_changes == 0);
  };
  for (int attempt = 0; attempt < 12; ++attempt) {
    r.schedule = planner(budget);
    r.sim = simulate(c.w, c.m, r.schedule, latency_ns, true);
    if (latency_ns > 0) without_late_changes(c.w, c.m, r.schedule, latency_ns, r.sim);
    if (ok()) break;
    budget -= std::max(0.0, r.sim.step_time_ns - target_ns) * 1.1 + 1.0;
  }
  // On a dependency graph the table's budget overstates the step's growth (it sums the overruns beyond the
  // floats, and overlapping ones move the step once): give the unused part back while the plan improves.
  for (int attempt = 0; attempt < 2 && ok() && !c.table.slack_ns.empty(); ++attempt) {
    const double unused_ns = target_ns - r.sim.step_time_ns;
    if (unused_ns <= 0.05 * eps * c.base.step_time_ns) break;
    StrategyResult more = r;
    more.schedule = planner(budget + unused_ns);
    more.sim = simulate(c.w, c.m, more.schedule, latency_ns, true);
    if (latency_ns > 0) without_late_changes(c.w, c.m, more.schedule, latency_ns, more.sim);
    const bool fits_more =
        more.sim.step_time_ns <= target_ns * (1 + 1e-12) && (latency_ns == 0 || more.sim.late_changes == 0);
    if (!fits_more || more.sim.energy_j >= r.sim.energy_j) break;
    r = std::move(more);
    budget += unused_ns;
  }
  if (!ok()) {
    // No plan of this strategy fits: keep the default clocks rather than break the budget.
    const plan::Strategy name = r.schedule.strategy;
    r.schedule = default_schedule(c.w, c.m);
    r.schedule.strategy = name;
    r.sim = simulate(c.w, c.m, r.schedule, latency_ns);
    r.within_budget = false;
  }
  r.schedule.switch_latency_ns = latency_ns;
  r.switch_latency_ns = latency_ns;
  r.shortest_phase_ns = shortest_phase_ns(r.schedule, r.sim);
  r.sim.timeline.clear();
  r.sim.timeline.shrink_to_fit();
  score(r, c.base);
  r.plan_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// A plan that changes clocks inside a CUDA graph launch cannot be applied: never a phase plan.
bool changes_inside_a_graph(const plan::ClockTable& t, const plan::Schedule& s) {
  for (std::size_t i = 1; i < t.may_change.size() && i < s.clocks.size(); ++i)
    if (t.may_change[i] == 0 && !(s.clocks[i] == s.clocks[i - 1])) return true;
  return false;
}

// Takes candidate `from`'s plan (and figures `sim`, already at r's latency) into r.
void adopt(StrategyResult& r, const StrategyResult& from, const SimResult& sim, const SimResult& base) {
  r.schedule.clocks = from.schedule.clocks;
  r.sim = sim;
  r.within_budget = true;
  r.shortest_phase_ns = from.shortest_phase_ns;
  score(r, base);
}

// Every strategy at budget ε: iteration, pass, kernel-local, kernel-global, then phase per latency. `prior`:
// the results of smaller budgets (their plans fit this budget too).
std::vector<StrategyResult> plan_budget(Context& c, double eps, const std::vector<double>& latencies,
                                        const std::vector<const StrategyResult*>& prior) {
  const auto& t = c.table;
  std::vector<StrategyResult> out;
  out.push_back(run(c, eps, 0, [&](double b) { return plan::plan_iteration(t, b); }));
  out.push_back(run(c, eps, 0, [&](double b) { return plan::plan_pass(t, c.w, b); }));
  const double eps_ns = eps * c.base.step_time_ns;
  out.push_back(run(c, eps, 0, [&](double b) {
    // Each op's own limit; shrink ε if the step as a whole would still overshoot (it does not when ops are serial).
    double scale = eps_ns <= 0 || b >= c.serial_base_ns + eps_ns ? 1.0 : (b - c.serial_base_ns) / eps_ns;
    return plan::plan_kernel_local(t, eps * std::max(0.0, scale));
  }));
  double lower_bound_j = -1;
  if (!c.kernel_global) c.kernel_global.emplace(t);
  out.push_back(run(c, eps, 0, [&](double b) { return c.kernel_global->plan(b, &lower_bound_j); }));
  const std::size_t global = 3, first_phase = out.size();
  double lambda_hint = -1;
  // Inside a CUDA graph launch no change can land: then even L = 0 phases are not single ops.
  const bool any_op_may_change =
      std::all_of(t.may_change.begin(), t.may_change.end(), [](std::uint8_t m) { return m != 0; });
  for (double L : latencies) {
    if (L == 0 && any_op_may_change) {
      out.push_back(out[global]);  // with L = 0 phases are single ops: the kernel-global problem (below)
      out.back().schedule.strategy = plan::Strategy::phase;
      continue;
    }
    plan::PhasePlanner& planner = c.phase_planner(L);
    out.push_back(run(c, eps, L, [&](double b) {
      // The time price barely moves with L: start from the last latency's.
      plan::Schedule s = planner.plan(b, lambda_hint);
      if (planner.last_lambda() > 0) lambda_hint = planner.last_lambda();
      return s;
    }));
  }
  // The same strategy's plans of smaller budgets fit this one.
  for (std::size_t i = 0; i < first_phase; ++i)
    for (const StrategyResult* p : prior)
      if (p->schedule.strategy == out[i].schedule.strategy && p->within_budget && p->sim.energy_j < out[i].sim.energy_j &&
          fits(p->sim, c.base, eps))
        adopt(out[i], *p, p->sim, c.base);
  std::vector<const StrategyResult*> all = prior;
  for (const auto& r : out) all.push_back(&r);
  // Phase at L, longest L first: the best of every plan made that runs with no late change at L.
  std::vector<std::size_t> order;
  for (std::size_t i = first_phase; i < out.size(); ++i)
    if (out[i].switch_latency_ns > 0) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return out[a].switch_latency_ns > out[b].switch_latency_ns; });
  for (std::size_t i : order) {
    StrategyResult& r = out[i];
    for (const StrategyResult* p : all) {
      if (p == &r || !p->within_budget || changes_inside_a_graph(t, p->schedule)) continue;
      auto sim = at_latency(c.w, c.m, *p, r.switch_latency_ns);
      if (sim && fits(*sim, c.base, eps) && (!r.within_budget || sim->energy_j < r.sim.energy_j))
        adopt(r, *p, *sim, c.base);
    }
  }
  // Kernel-global: every plan is a kernel plan; keep the knapsack's unless another simulates better. Its gap
  // is the proven one of the table's problem (the simulator's exactly on one stream).
  StrategyResult& g = out[global];
  for (const StrategyResult* p : all) {
    if (p == &g || !p->within_budget) continue;
    auto sim = at_latency(c.w, c.m, *p, 0);
    if (sim && fits(*sim, c.base, eps) && (!g.within_budget || sim->energy_j < g.sim.energy_j)) adopt(g, *p, *sim, c.base);
  }
  if (g.within_budget && lower_bound_j > 0) {
    double e = 0;
    for (std::size_t i = 0; i < t.ops; ++i)
      e += t.energy(i, static_cast<std::size_t>(std::find(t.clocks.begin(), t.clocks.end(), g.schedule.clocks[i]) -
                                                t.clocks.begin()));
    g.schedule.optimality_gap = std::max(0.0, (e - lower_bound_j) / lower_bound_j);
  }
  for (std::size_t i = first_phase; i < out.size(); ++i)
    if (out[i].switch_latency_ns == 0 && any_op_may_change) {
      const std::int64_t plan_ns = out[i].plan_ns;
      out[i] = g;
      out[i].schedule.strategy = plan::Strategy::phase;
      out[i].plan_ns = plan_ns;
    }
  return out;
}

}  // namespace

Evaluation evaluate(const model::Workload& w, const model::DvfsModel& m, const EvaluateOptions& o) {
  Evaluation ev;
  ev.baseline = simulate(w, m, default_schedule(w, m), 0);
  const plan::ClockTable table = plan::build_clock_table(w, m);
  Context c{w, m, ev.baseline, table, plan::total_time_ns(table, table.default_index), {}, {}, {}};
  ev.frontier_latency_ns = o.frontier_latency_ns.value_or(m.spec().switch_latency_ns);
  // Budgets in ascending order, the main one with the whole latency sweep; each sees the smaller ones' plans.
  std::vector<double> budgets = o.frontier_slowdowns;
  budgets.push_back(o.max_slowdown);
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  std::vector<std::vector<StrategyResult>> per_budget;
  per_budget.reserve(budgets.size());
  for (double eps : budgets) {
    std::vector<const StrategyResult*> prior;
    for (const auto& b : per_budget)
      for (const auto& r : b) prior.push_back(&r);
    const bool main = eps == o.max_slowdown;
    std::vector<double> latencies{ev.frontier_latency_ns};
    auto listed = [](const std::vector<double>& v, double x) { return std::find(v.begin(), v.end(), x) != v.end(); };
    if (main) {
      latencies = o.switch_latencies_ns;
      for (double l : o.min_phase_ladder_ns)
        if (!listed(latencies, l)) latencies.push_back(l);
      if (!listed(latencies, ev.frontier_latency_ns)) latencies.push_back(ev.frontier_latency_ns);
    }
    per_budget.push_back(plan_budget(c, eps, latencies, prior));
    if (!main) continue;
    for (const auto& r : per_budget.back()) {
      const bool phase = r.schedule.strategy == plan::Strategy::phase;
      if (!phase || listed(o.switch_latencies_ns, r.switch_latency_ns)) ev.strategies.push_back(r);
      if (phase && listed(o.min_phase_ladder_ns, r.switch_latency_ns)) {
        ev.coarser.push_back(r);
        ev.coarser.back().min_phase_ns = r.switch_latency_ns;
      }
    }
  }
  std::sort(ev.coarser.begin(), ev.coarser.end(),
            [](const StrategyResult& a, const StrategyResult& b) { return a.min_phase_ns < b.min_phase_ns; });
  for (double f : o.frontier_slowdowns) {
    const auto& b = per_budget[static_cast<std::size_t>(std::find(budgets.begin(), budgets.end(), f) - budgets.begin())];
    FrontierPoint p;
    p.max_slowdown = f;
    for (const auto& r : b)
      if (r.schedule.strategy != plan::Strategy::phase || r.switch_latency_ns == ev.frontier_latency_ns) p.strategies.push_back(r);
    ev.frontier.push_back(std::move(p));
  }
  return ev;
}

}  // namespace gearshift::sim
