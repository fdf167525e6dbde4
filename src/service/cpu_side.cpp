#include "service/cpu_side.hpp"

#include <fmt/format.h>

#include "graph/step_graph.hpp"
#include "sim/simulator.hpp"

namespace gearshift::service {

CpuSide decide_cpu_side(model::Workload& w, const model::DvfsModel& m, const std::string& measured_by,
                        bool gearshift_traced) {
  CpuSide c;
  w.cpu_time_scale = 1;
  w.cpu_less_per_event_ns = 0;
  c.traced_step_ns = c.replayed_step_ns = sim::simulate(w, m, sim::default_schedule(w, m), 0).step_time_ns;
  if (!measured_by.empty()) {
    c.evidence = measured_by;
    return c;
  }
  if (!graph::build_step_graph(w).dependency) {
    c.evidence = "no launch timeline: the replay keeps the traced gaps, which no kernel is slowed into";
    return c;
  }
  c.as_traced = false;
  if (gearshift_traced) {
    c.reading = CpuSide::Reading::tracer_cost_out;
    w.cpu_less_per_event_ns = kGearshiftTracerCostPerCallNs;
  } else {
    c.reading = CpuSide::Reading::gpu_bound;
    w.cpu_time_scale = 0;
  }
  c.replayed_step_ns = sim::simulate(w, m, sim::default_schedule(w, m), 0).step_time_ns;
  c.evidence =
      gearshift_traced
          ? fmt::format("no untraced step measured: gearshift's tracer adds up to {:.0f} µs to each launch (measured), "
                        "taken out of every CPU call, so every figure is of that step ({:.2f} ms; {:.2f} ms as traced)",
                        kGearshiftTracerCostPerCallNs / 1e3, c.replayed_step_ns / 1e6, c.traced_step_ns / 1e6)
          : fmt::format("no untraced step measured: the GPU's waits for the CPU in the trace may be a profiler's "
                        "delays, so every figure is of the step replayed GPU-bound ({:.2f} ms; {:.2f} ms with the CPU "
                        "side as traced)",
                        c.replayed_step_ns / 1e6, c.traced_step_ns / 1e6);
  return c;
}

void plan_if_launch_bound(CpuSide& c, const model::Workload& w, const model::DvfsModel& m, sim::EvaluateOptions eo,
                          const sim::StrategyResult& chosen) {
  if (c.as_traced) return;
  model::Workload traced = w;
  traced.cpu_time_scale = 1;
  traced.cpu_less_per_event_ns = 0;
  eo.switch_latencies_ns = {chosen.switch_latency_ns};
  eo.frontier_slowdowns.clear();
  eo.min_phase_ladder_ns.clear();
  const sim::Evaluation e = sim::evaluate(traced, m, eo);
  for (const auto& s : e.strategies)
    if (s.schedule.strategy == chosen.schedule.strategy &&
        (s.schedule.strategy != plan::Strategy::phase || s.switch_latency_ns == chosen.switch_latency_ns))
      c.if_launch_bound = s;
  if (c.if_launch_bound)
    c.if_launch_bound_parts = sim::saving_parts(traced, m, c.if_launch_bound->schedule, c.if_launch_bound->switch_latency_ns);
}

std::string CpuSide::line() const {
  if (as_traced) return "as traced: " + evidence;
  std::string s = evidence;
  if (if_launch_bound)
    s += fmt::format("; if the job is as launch-bound as traced, {} would save {:.2f} % at {:.3f} % slowdown "
                     "(MODELLED, not the plan written: measure the untraced step, e.g. `gearshift run --auto`)",
                     plan::to_string(if_launch_bound->schedule.strategy), if_launch_bound->saving_pct,
                     if_launch_bound->slowdown_pct);
  return s;
}

nlohmann::json CpuSide::to_json() const {
  const char* name = reading == Reading::as_traced         ? "as_traced"
                     : reading == Reading::tracer_cost_out ? "tracer_cost_out"
                                                           : "gpu_bound";
  nlohmann::json j = {{"reading", name}, {"evidence", evidence}, {"traced_step_s", traced_step_ns * 1e-9},
                      {"replayed_step_s", replayed_step_ns * 1e-9}};
  if (if_launch_bound)
    j["if_launch_bound"] = {{"strategy", plan::to_string(if_launch_bound->schedule.strategy)},
                            {"switch_latency_us", if_launch_bound->switch_latency_ns / 1e3},
                            {"saving_pct", if_launch_bound->saving_pct},
                            {"slowdown_pct", if_launch_bound->slowdown_pct},
                            {"time_s", if_launch_bound->sim.step_time_ns * 1e-9}};
  if (if_launch_bound_parts) j["if_launch_bound"]["saving_parts"] = if_launch_bound_parts->to_json();
  return j;
}

}  // namespace gearshift::service
