#include "service/cpu_side.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "graph/step_graph.hpp"
#include "sim/simulator.hpp"

namespace gearshift::service {

std::optional<ProfilerCost> profiler_cost(const trace::ProfilerRecords& p, double period_ns) {
  if (p.cpu_ops <= 0 || !(period_ns > 0)) return std::nullopt;
  // Records per step: the trace's count over the steps its records span (at least one).
  const double steps = std::max(1.0, static_cast<double>(p.last_ns - p.first_ns) / period_ns);
  ProfilerCost c;
  c.cpu_ops_per_step = static_cast<double>(p.cpu_ops) / steps;
  // A trace stripped of its CPU ops (only step annotations left) tells nothing of what recording them cost.
  if (c.cpu_ops_per_step < kMinCpuOpsPerStep) return std::nullopt;
  c.runtime_calls_per_step = static_cast<double>(p.runtime_calls) / steps;
  c.shapes = p.shapes;
  c.stacks = p.python_functions > 0;
  c.low_ns = c.cpu_ops_per_step * kProfilerCostPerCpuOpLowNs;
  c.high_ns = c.cpu_ops_per_step * kProfilerCostPerCpuOpHighNs;
  return c;
}

std::string ProfilerCost::line(double traced_step_ns, double replayed_step_ns) const {
  std::string with = shapes && stacks ? ", with shapes and stacks" : shapes ? ", with shapes" : stacks ? ", with stacks" : "";
  return fmt::format("the profiler recorded about {:.0f} CPU ops and {:.0f} runtime calls per step{}: at 2.9-4.2 µs "
                     "per recorded CPU op (measured, torch.profiler on an H100, bench/results/2026-12-07-s33-device.md) "
                     "its recording cost the traced step about {:.1f}-{:.1f} ms of CPU time ({:.0f}-{:.0f} % of the "
                     "{:.2f} ms replayed with the CPU side as traced; the GPU-bound replay is {:.2f} ms shorter)",
                     cpu_ops_per_step, runtime_calls_per_step, with, low_ns / 1e6, high_ns / 1e6,
                     100 * low_ns / traced_step_ns, 100 * high_ns / traced_step_ns, traced_step_ns / 1e6,
                     (traced_step_ns - replayed_step_ns) / 1e6);
}

nlohmann::json ProfilerCost::to_json() const {
  return {{"cpu_ops_per_step", cpu_ops_per_step}, {"runtime_calls_per_step", runtime_calls_per_step},
          {"shapes", shapes}, {"stacks", stacks}, {"cost_low_ms", low_ns / 1e6}, {"cost_high_ms", high_ns / 1e6},
          {"cost_per_cpu_op_us", {kProfilerCostPerCpuOpLowNs / 1e3, kProfilerCostPerCpuOpHighNs / 1e3}}};
}

namespace {

double replayed_at(model::Workload& w, const model::DvfsModel& m, double scale) {
  w.cpu_time_scale = scale;
  return sim::simulate(w, m, sim::default_schedule(w, m), 0).step_time_ns;
}

// The measured untraced step weighed against the replay: as traced where it is as long, else the CPU's own time
// scaled to it (the replayed step is non-decreasing in the scale: every CPU stretch is).
void weigh_measured_step(CpuSide& c, model::Workload& w, const model::DvfsModel& m, double measured_ns) {
  if (!(measured_ns > 0) || measured_ns >= c.traced_step_ns * (1 - kCpuSideMeasuredTolerance) ||
      !graph::build_step_graph(w).dependency)
    return;
  const std::string supports = c.evidence;
  c.gpu_bound_step_ns = replayed_at(w, m, 0);
  c.as_traced = false;
  if (measured_ns <= c.gpu_bound_step_ns) {
    c.reading = CpuSide::Reading::gpu_bound;
    c.cpu_time_scale = 0;
    c.replayed_step_ns = c.gpu_bound_step_ns;
    c.evidence = fmt::format("{} is no longer than the step replayed GPU-bound ({:.2f} ms; {:.2f} ms with the CPU "
                             "side as traced): none of the GPU's waits for the CPU in the trace is supported, so "
                             "every figure is of the GPU-bound step",
                             supports, c.gpu_bound_step_ns / 1e6, c.traced_step_ns / 1e6);
    return;
  }
  double lo = 0, hi = 1;
  for (int i = 0; i < 30 && hi - lo > 1e-4; ++i) {
    const double mid = (lo + hi) / 2;
    (replayed_at(w, m, mid) > measured_ns ? hi : lo) = mid;
  }
  c.reading = CpuSide::Reading::scaled_to_measured;
  c.cpu_time_scale = lo;  // the largest scale found whose step is within the measured one
  c.replayed_step_ns = replayed_at(w, m, lo);
  const double waits = c.traced_step_ns - c.gpu_bound_step_ns;
  c.evidence = fmt::format("{} supports {:.2f} of the {:.2f} ms the GPU waited for the CPU as traced (the step "
                           "replayed: {:.2f} ms as traced, {:.2f} ms GPU-bound): the CPU's own time scaled by {:.3f}, "
                           "so every figure is of the {:.2f} ms step",
                           supports, (c.replayed_step_ns - c.gpu_bound_step_ns) / 1e6, waits / 1e6,
                           c.traced_step_ns / 1e6, c.gpu_bound_step_ns / 1e6, lo, c.replayed_step_ns / 1e6);
}

}  // namespace

CpuSide decide_cpu_side(model::Workload& w, const model::DvfsModel& m, const std::string& measured_by,
                        bool gearshift_traced, double measured_step_ns) {
  CpuSide c;
  w.cpu_time_scale = 1;
  w.cpu_less_per_event_ns = 0;
  c.traced_step_ns = c.replayed_step_ns = sim::simulate(w, m, sim::default_schedule(w, m), 0).step_time_ns;
  if (!measured_by.empty()) {
    c.evidence = measured_by;
    weigh_measured_step(c, w, m, measured_step_ns);
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
    c.cpu_time_scale = 0;
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
  const char* name = reading == Reading::as_traced            ? "as_traced"
                     : reading == Reading::tracer_cost_out    ? "tracer_cost_out"
                     : reading == Reading::scaled_to_measured ? "scaled_to_measured"
                                                              : "gpu_bound";
  nlohmann::json j = {{"reading", name}, {"evidence", evidence}, {"traced_step_s", traced_step_ns * 1e-9},
                      {"replayed_step_s", replayed_step_ns * 1e-9}};
  if (reading == Reading::scaled_to_measured) j["cpu_time_scale"] = cpu_time_scale;
  if (if_launch_bound)
    j["if_launch_bound"] = {{"strategy", plan::to_string(if_launch_bound->schedule.strategy)},
                            {"switch_latency_us", if_launch_bound->switch_latency_ns / 1e3},
                            {"saving_pct", if_launch_bound->saving_pct},
                            {"slowdown_pct", if_launch_bound->slowdown_pct},
                            {"time_s", if_launch_bound->sim.step_time_ns * 1e-9}};
  if (if_launch_bound_parts) j["if_launch_bound"]["saving_parts"] = if_launch_bound_parts->to_json();
  if (profiler) j["profiler"] = profiler->to_json();
  return j;
}

}  // namespace gearshift::service
