#include "service/sync_slack.hpp"

#include "service/cpu_side.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "gpu/spec.hpp"
#include "plan/clock_table.hpp"
#include "plan/strategies.hpp"
#include "service/cpu_side.hpp"
#include "sim/collectives.hpp"
#include "sim/evaluate.hpp"
#include "sim/measurement.hpp"
#include "sim/simulator.hpp"
#include "trace/gearshift_format.hpp"
#include "trace/iteration.hpp"

namespace gearshift::service {

// The simulator's parts this job combines (sim/: the physics; here: the planning across ranks).
using sim::calibrate_to_measured_power;
using sim::default_schedule;
using sim::measured_power;
using sim::RankReplay;
using sim::SimResult;
using sim::simulate;
using sim::simulate_ranks;

RankInput rank_from_trace(trace::Trace t, const std::string& gpu, const std::string& label, bool calibrate) {
  model::DvfsModel m(gpu::find_spec(gpu));
  auto a = trace::detect_iterations(t);
  model::Workload w = model::build_workload(t, a, m);
  std::optional<sim::MeasuredPower> p = calibrate ? sim::measured_power(t, a) : std::nullopt;
  if (p) sim::calibrate_to_measured_power(w, m, p->average_power_w);
  const auto& ms = t.measured;
  // What the trace's import and the step detection left out or doubt (a stalled step, dropped events), as
  // `gearshift plan` prints them: plan-ranks' report said nothing of a rank's 415 ms stalled step.
  std::vector<std::string> warnings = t.health.warnings;
  warnings.insert(warnings.end(), a.evidence.warnings.begin(), a.evidence.warnings.end());
  // The CPU side as `plan` takes it (service/cpu_side.hpp): a profiler's launch delays are no rank's slack.
  const CpuSide cpu = decide_cpu_side(
      w, m,
      ms.step_time_s && *ms.step_time_s > 0 ? fmt::format("the trace's measured untraced step, {:.2f} ms", *ms.step_time_s * 1e3) : "",
      t.format.starts_with("gearshift-trace"), ms.step_time_s.value_or(0) * 1e9);
  if (!cpu.as_traced) warnings.push_back("CPU side: " + cpu.evidence);
  return RankInput{
      std::move(w), std::move(m), label, ms.step_time_s.value_or(0) * 1e9, ms.energy_per_step_j.value_or(0),
      std::move(p), std::move(warnings)};
}

RankInput load_rank(const std::string& trace_path, const std::string& gpu) {
  return rank_from_trace(trace::import_trace(trace_path), gpu, trace_path);
}

namespace {

bool is_comm(const model::WorkloadOp& op) { return op.cls == model::KernelClass::communication; }

double comm_time_ns(const model::Workload& w);

// Rank r's template with its communication ops scaled to `intrinsic_comm_ns` in total (see the header).
model::Workload wait_free(const model::Workload& traced, double intrinsic_comm_ns) {
  model::Workload w = traced;
  const double c = comm_time_ns(traced);
  if (c <= 0) return w;
  for (auto& op : w.ops)
    if (is_comm(op)) op.ref_time_ns *= intrinsic_comm_ns / c;
  return w;
}

double comm_time_ns(const model::Workload& w) {
  double ns = 0;
  for (const auto& op : w.ops)
    if (is_comm(op)) ns += op.ref_time_ns;
  return ns;
}

// The least communication time of the ranks' steps, ns: the collectives' own time, the rest being the wait.
double min_comm_time_ns(const std::vector<RankInput>& ranks) {
  double ns = 1e300;
  for (const auto& r : ranks) ns = std::min(ns, comm_time_ns(r.workload));
  return ns;
}

// Power of a GPU spinning inside an NCCL kernel at clocks c, W: the longest communication op of the template
// stands for the wait; without one, the idle power.
double wait_power_w(const model::Workload& w, const model::DvfsModel& m, model::ClockPair c) {
  const model::WorkloadOp* longest = nullptr;
  for (const auto& op : w.ops)
    if (is_comm(op) && (!longest || op.ref_time_ns > longest->ref_time_ns)) longest = &op;
  if (!longest) return m.idle_power_w(c.sm_mhz);
  return m.predict(1e6, longest->ref, c, longest->coeffs).power_w;
}

// Energy per step with the wait until the deadline accounted at the clocks the step ends on, J.
double energy_to_deadline(const model::Workload& w, const model::DvfsModel& m, const SimResult& s,
                          const plan::Schedule& sched, double deadline_ns) {
  // In s as always (the written energies keep their last digit).
  const double wait_s = std::max(0.0, deadline_ns * 1e-9 - s.step_time_ns * 1e-9);
  return s.energy_j + wait_s * wait_power_w(w, m, sched.clocks.back());
}

}  // namespace

SyncSlackResult plan_sync_slack(const std::vector<RankInput>& ranks, const SyncSlackOptions& o) {
  if (ranks.empty()) throw std::invalid_argument("sync-slack planning needs at least one rank");
  if (o.strategy != plan::Strategy::phase && o.strategy != plan::Strategy::kernel_global)
    throw std::invalid_argument(std::string("sync-slack strategy '") + plan::to_string(o.strategy) +
                                "' (phase, kernel-global)");
  if (o.switch_latency_ns && !(*o.switch_latency_ns >= 0 && std::isfinite(*o.switch_latency_ns)))
    throw std::invalid_argument("sync-slack switch latency " + std::to_string(*o.switch_latency_ns * 1e-6) +
                                " ms (a number of ms >= 0)");
  const double min_comm = min_comm_time_ns(ranks);
  int communicating = 0;
  for (const auto& r : ranks) communicating += comm_time_ns(r.workload) > 0;
  if (communicating != 0 && communicating != static_cast<int>(ranks.size()))
    throw std::invalid_argument("only " + std::to_string(communicating) + " of " + std::to_string(ranks.size()) +
                                " ranks' traces hold NCCL kernels: sync-aware slack needs the data-parallel ranks "
                                "of one job, each traced with its communication");
  SyncSlackResult res;
  const auto& spec = ranks[0].model.spec();
  const double latency_ns =
      o.strategy == plan::Strategy::kernel_global ? 0.0 : o.switch_latency_ns.value_or(spec.switch_latency_ns);
  res.switch_latency_ns = latency_ns;

  std::vector<model::Workload> intr;
  std::vector<graph::StepGraph> graph;  // each rank's traced graph: its gaps stay the traced ones without the wait
  std::vector<SimResult> base;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    intr.push_back(wait_free(ranks[r].workload, min_comm));
    graph.push_back(graph::build_step_graph(ranks[r].workload));
    base.push_back(simulate(intr[r], graph[r], ranks[r].model, default_schedule(intr[r], ranks[r].model), 0));
    if (base[r].step_time_ns > res.deadline_ns)
      res.deadline_ns = base[r].step_time_ns, res.straggler = static_cast<int>(r);
  }
  const double deadline = res.deadline_ns;
  res.job_step_time_before_ns = deadline;

  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto& m = ranks[r].model;
    const auto& w = intr[r];
    RankPlan p;
    p.rank = static_cast<int>(r);
    auto def = default_schedule(ranks[r].workload, m);
    auto traced = simulate(ranks[r].workload, m, def, 0);
    p.traced_step_time_ns = traced.step_time_ns;
    p.traced_energy_j = traced.energy_j;
    p.comm_time_ns = comm_time_ns(ranks[r].workload);
    p.intrinsic_comm_time_ns = comm_time_ns(w);
    p.intrinsic_step_time_ns = base[r].step_time_ns;
    p.straggler_factor = deadline / base[r].step_time_ns;
    p.baseline_energy_j = energy_to_deadline(w, m, base[r], def, deadline);

    // Serial budget = Σ default op times + the slack; tightened until the simulated step meets the deadline.
    auto table = plan::build_clock_table(w, m, 0, &graph[r]);
    double budget = plan::total_time_ns(table, table.default_index) + (deadline - base[r].step_time_ns);
    plan::Schedule best = def;
    SimResult best_sim = base[r];
    for (int attempt = 0; attempt < 12; ++attempt) {
      plan::Schedule s = o.strategy == plan::Strategy::phase ? plan::plan_phase(table, w, budget, latency_ns)
                                               : plan::plan_kernel_global(table, budget);
      SimResult sim = simulate(w, graph[r], m, s, latency_ns);
      if (sim.step_time_ns <= deadline * (1 + 1e-9)) {
        best = std::move(s), best_sim = sim;
        break;
      }
      budget -= (sim.step_time_ns - deadline) * 1.1 + 1.0;
    }
    // The wait until the deadline is spent at the clocks the step ends on (energy_to_deadline): where it lasts at
    // least the switch latency, the last position runs at the lowest SM clock if that saves energy and the step
    // still meets the deadline (the change back lands before the next step's first op: one wait later).
    if (deadline - best_sim.step_time_ns >= latency_ns) {
      plan::Schedule low = best;
      low.clocks.back().sm_mhz = spec.min_sm_clock_mhz();
      SimResult sim = simulate(w, graph[r], m, low, latency_ns);
      if (sim.step_time_ns <= deadline * (1 + 1e-9) && sim.late_changes == 0 &&
          energy_to_deadline(w, m, sim, low, deadline) < energy_to_deadline(w, m, best_sim, best, deadline))
        best = std::move(low), best_sim = sim;
    }
    p.schedule = best;
    p.planned_step_time_ns = best_sim.step_time_ns;
    p.planned_energy_j = energy_to_deadline(w, m, best_sim, best, deadline);
    if (p.planned_energy_j > p.baseline_energy_j) {  // never worse than leaving the clocks alone
      p.schedule = def, p.planned_step_time_ns = base[r].step_time_ns, p.planned_energy_j = p.baseline_energy_j;
    }
    p.saving_pct = 100 * (p.baseline_energy_j - p.planned_energy_j) / p.baseline_energy_j;
    res.job_step_time_after_ns = std::max(res.job_step_time_after_ns, p.planned_step_time_ns);
    res.job_energy_before_j += p.baseline_energy_j;
    res.job_energy_after_j += p.planned_energy_j;
    res.ranks.push_back(std::move(p));
  }
  if (std::all_of(graph.begin(), graph.end(), [](const graph::StepGraph& g) { return g.dependency; })) {
    std::vector<RankReplay> before, after;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      before.push_back({&ranks[r].workload, &ranks[r].model, default_schedule(ranks[r].workload, ranks[r].model)});
      after.push_back({&ranks[r].workload, &ranks[r].model, res.ranks[r].schedule});
    }
    try {
      const double b = simulate_ranks(before, latency_ns).job_step_time_ns;
      const double a = simulate_ranks(after, latency_ns).job_step_time_ns;
      res.job_step_time_before_ns = b, res.job_step_time_after_ns = a, res.collectives_replayed = true;
    } catch (const std::invalid_argument&) {
      // The ranks do not issue the same collectives: the ranks' own steps stand.
    }
  }
  return res;
}

RankPlanInReading rank_plan_in_reading(const std::vector<RankInput>& ranks, const SyncSlackResult& res,
                                       std::size_t rank, const model::Workload& w, const model::DvfsModel& m) {
  const model::Workload intr = wait_free(w, min_comm_time_ns(ranks));
  const graph::StepGraph g = graph::build_step_graph(w);
  const plan::Schedule def = default_schedule(intr, m);
  const plan::Schedule& planned = res.ranks.at(rank).schedule;
  const SimResult base = simulate(intr, g, m, def, 0);
  const SimResult sim = simulate(intr, g, m, planned, res.switch_latency_ns);
  const double before = energy_to_deadline(intr, m, base, def, res.deadline_ns);
  const double after = energy_to_deadline(intr, m, sim, planned, res.deadline_ns);
  return {100 * (before - after) / before, sim.step_time_ns};
}

}  // namespace gearshift::service
