#include "sim/saving_parts.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "graph/step_graph.hpp"
#include "sim/simulator.hpp"

namespace gearshift::sim {

double SavingParts::waits_total_j() const {
  double s = 0;
  for (double j : waits_j) s += j;
  return s;
}

std::string SavingParts::line() const {
  std::string waits;
  for (graph::WaitKind k : graph::kWaitKindsShown) {
    const double p = pct(waits_j[static_cast<std::size_t>(k)]);
    if (std::abs(p) < 0.005) continue;
    waits += fmt::format("{}{} {:.2f} %", waits.empty() ? "" : ", ", graph::to_string(k), p);
  }
  return fmt::format("busy kernels' clocks {:.2f} %, waits {:.2f} %{}, board idle power {:.2f} %", pct(busy_kernels_j),
                     pct(waits_total_j()), waits.empty() ? "" : " (" + waits + ")", pct(idle_j));
}

nlohmann::json SavingParts::to_json() const {
  nlohmann::json kinds = nlohmann::json::object();
  for (graph::WaitKind k : graph::kWaitKindsShown)
    kinds[std::string(graph::json_key(k))] = pct(waits_j[static_cast<std::size_t>(k)]);
  return {{"saving_j", saving_j},
          {"baseline_energy_j", baseline_energy_j},
          {"busy_kernels_pct", pct(busy_kernels_j)},
          {"waits_pct", pct(waits_total_j())},
          {"waits_by_kind_pct", kinds},
          {"idle_power_pct", pct(idle_j)},
          {"dependency_replay", dependency_replay}};
}

SavingParts saving_parts(const model::Workload& w, const model::DvfsModel& m, const plan::Schedule& plan,
                         double switch_latency_ns) {
  const SimResult base = simulate(w, m, default_schedule(w, m), 0, true);
  const SimResult planned = simulate(w, m, plan, switch_latency_ns, true);
  SavingParts p;
  p.baseline_energy_j = base.energy_j;
  p.saving_j = base.energy_j - planned.energy_j;
  p.dependency_replay = base.dependency_replay;
  const std::size_t n = w.ops.size();
  if (n == 0 || base.timeline.size() != n || planned.timeline.size() != n) {
    p.idle_j = p.saving_j;
    return p;
  }
  std::vector<double> base_ns(n);
  for (std::size_t i = 0; i < n; ++i) base_ns[i] = base.timeline[i].end_ns - base.timeline[i].start_ns;
  std::vector<graph::OpWait> waits(n);
  if (base.dependency_replay) {
    const graph::StepGraph g = graph::build_step_graph(w);
    std::vector<std::uint8_t> comm(n);
    for (std::size_t i = 0; i < n; ++i) comm[i] = w.ops[i].cls == model::KernelClass::communication;
    waits = graph::waits_after(g, graph::replay_fixed(g, base_ns), comm);
  }
  // Each op's dynamic energy (above idle) as the simulator counts it: its power at the clocks in effect.
  auto dynamic_j = [&](const TimelineEntry& e, std::size_t i) {
    const model::Prediction q = model::predict_op(m, w.ops[i], e.requested);
    return (q.power_w - q.idle_power_w) * (e.end_ns - e.start_ns) * 1e-9;
  };
  // The float each op's slowing can use: its own, or the one at the end of its chain of back-to-back ops on its
  // stream, shared by the chain's slowing (positions rise along a stream: one pass from the back).
  std::vector<double> longer(n, 0), chain_longer(n, 0), usable(n, 0);
  std::vector<std::size_t> tail(n);
  for (std::size_t i = 0; i < n; ++i)
    longer[i] = std::max(0.0, (planned.timeline[i].end_ns - planned.timeline[i].start_ns) - base_ns[i]);
  for (std::size_t k = n; k-- > 0;) {
    const graph::OpWait& wt = waits[k];
    if (wt.chain_next >= 0) {
      const auto q = static_cast<std::size_t>(wt.chain_next);
      tail[k] = tail[q];
      usable[k] = std::min(usable[q], wt.chain_cap_ns);
    } else {
      tail[k] = k;
      usable[k] = wt.kind == graph::WaitKind::none ? 0.0 : wt.float_ns;
    }
  }
  for (std::size_t i = 0; i < n; ++i) chain_longer[tail[i]] += longer[i];
  double ops_j = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double saved = dynamic_j(base.timeline[i], i) - dynamic_j(planned.timeline[i], i);
    ops_j += saved;
    const double slowed = chain_longer[tail[i]];
    const double share = longer[i] > 0 && slowed > 0 ? std::min(1.0, usable[i] / slowed) : 0.0;
    p.waits_j[static_cast<std::size_t>(waits[tail[i]].kind)] += saved * share;
    p.busy_kernels_j += saved * (1 - share);
  }
  p.idle_j = p.saving_j - ops_j;
  return p;
}

}  // namespace gearshift::sim
