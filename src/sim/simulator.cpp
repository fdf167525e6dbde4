#include "sim/simulator.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace gearshift::sim {

plan::Schedule default_schedule(const model::Workload& w, const model::DvfsModel& m) {
  model::ClockPair def{m.spec().default_sm_clock_mhz, m.spec().default_mem_clock_mhz};
  return plan::Schedule{"default", 0, std::vector<model::ClockPair>(w.ops.size(), def), 0};
}

SimResult simulate(const model::Workload& w, const model::DvfsModel& m, const plan::Schedule& s, double latency_ns,
                   bool keep_timeline) {
  if (s.clocks.size() != w.ops.size())
    throw std::invalid_argument("simulate: the schedule has " + std::to_string(s.clocks.size()) +
                                " positions, the template " + std::to_string(w.ops.size()));
  SimResult r;
  const std::size_t n = w.ops.size();
  if (n == 0) return r;
  // Clock changes in effect over time: (time they land, clocks). The previous step ended on the last position's
  // request; it is in effect from the start.
  struct Change {
    double at_ns;
    model::ClockPair clocks;
  };
  std::vector<Change> changes{{-1e300, s.clocks[n - 1]}};
  model::ClockPair last_requested = s.clocks[n - 1];
  std::map<std::int32_t, double> stream_free;  // stream -> time it is free, ns
  double prev_start = 0, step_end = 0, dynamic_j = 0;
  auto in_effect = [&](double t) {
    // Changes land in issue order (each L after its issue), so the last one landed by t is in effect.
    model::ClockPair c = changes.front().clocks;
    for (const auto& ch : changes)
      if (ch.at_ns <= t) c = ch.clocks;
    return c;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const auto& op = w.ops[i];
    double free = stream_free.count(op.stream) ? stream_free[op.stream] : 0.0;
    double start = std::max(free + op.gap_before_ns, prev_start);
    if (!(s.clocks[i] == last_requested)) {
      changes.push_back({start + latency_ns, s.clocks[i]});
      last_requested = s.clocks[i];
      ++r.clock_changes;
    }
    model::ClockPair c = in_effect(start);
    auto p = m.predict(op.ref_time_ns, op.ref, c, op.coeffs);
    double end = start + p.time_ns;
    dynamic_j += (p.power_w - p.idle_power_w) * p.time_ns * 1e-9;
    r.busy_time_s += p.time_ns * 1e-9;
    stream_free[op.stream] = end;
    prev_start = start;
    step_end = std::max(step_end, end);
    if (keep_timeline) r.timeline.push_back({i, start, end, c, p.effective_sm_mhz, p.power_w});
  }
  step_end += w.tail_ns;
  // Idle power integrated over the clocks in effect.
  double idle_j = 0;
  for (std::size_t k = 0; k < changes.size(); ++k) {
    double from = std::max(0.0, changes[k].at_ns);
    double to = k + 1 < changes.size() ? std::min(step_end, std::max(0.0, changes[k + 1].at_ns)) : step_end;
    if (to > from) idle_j += m.idle_power_w(changes[k].clocks.sm_mhz) * (to - from) * 1e-9;
  }
  r.step_time_s = step_end * 1e-9;
  r.energy_j = dynamic_j + idle_j;
  r.average_power_w = r.energy_j / r.step_time_s;
  return r;
}

}  // namespace gearshift::sim
