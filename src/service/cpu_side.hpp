// What a plan may take from the CPU side of a trace (issue 46: a profiler's delay is not slack).
//
// The dependency-driven replay lets a kernel run slower where the GPU waited for the CPU: its launch came late, or
// the CPU was busy after a synchronize. In a profiled trace those waits are partly the profiler's own: it slows
// the CPU side (gearshift found profiled H200 steps 12-49 % longer than the untraced ones: issue 46, on every shared
// H200 trace that carries its untraced step), and the GPU that waited under it may not wait at all without it. So
// the CPU side counts as traced only where an untraced measurement supports it: the trace's measured untraced
// step (its meta; a far longer traced step is re-timed to it first), or `run --auto`'s own untraced window. A
// measured untraced step shorter than the traced step replayed supports only part of the GPU's waits for the CPU:
// the CPU's own time is then scaled (one factor, found by bisection) until the replayed step is the measured one,
// and at worst the step is replayed GPU-bound. Without
// one, a trace of gearshift's own tracer (whose cost per call is measured) is replayed with that cost taken out of
// every CPU call, and any other trace GPU-bound (model::Workload::cpu_time_scale 0: the CPU's own time cut to its
// calls' least cost); the chosen strategy planned on the CPU side as traced is then shown apart, as what the job could
// give if it really is as launch-bound as its trace.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "sim/evaluate.hpp"
#include "sim/saving_parts.hpp"
#include "trace/record.hpp"

namespace gearshift::service {

// The CPU cost per launch that recording every kernel's activity adds, ns: an empty kernel's launch measured
// 3.06-4.11 us plain and 3.86-6.11 us with every kernel's activity on an H200 (bench/results/2026-12-03-overhead.md,
// session 17); the largest difference, so that no tracer delay is left in the CPU side.
inline constexpr double kGearshiftTracerCostPerCallNs = 3000;

// What torch.profiler's recording costs the CPU per recorded CPU op, ns: 2.9-4.2 µs in six of eight runs of two
// launch-bound jobs on an H100 (default, record_shapes, with_stack; the step's extra time over the CPU op records;
// bench/device/profiler_cost.py, bench/results/2026-12-07-s33-device.md). Noisy (one run each): a range, not a figure.
inline constexpr double kProfilerCostPerCpuOpLowNs = 2900;
inline constexpr double kProfilerCostPerCpuOpHighNs = 4200;

// The profiler's own cost on the traced step, estimated from its records (trace::ProfilerRecords) and that range.
struct ProfilerCost {
  double cpu_ops_per_step = 0, runtime_calls_per_step = 0;  // records per step (the trace's count over its span)
  bool shapes = false, stacks = false;
  double low_ns = 0, high_ns = 0;  // CPU time per step the recording cost the job, ns (estimate)
  std::string line(double traced_step_ns, double replayed_step_ns) const;  // the plan table's "Profiler" line
  nlohmann::json to_json() const;
};

// None where the trace holds fewer than kMinCpuOpsPerStep profiler CPU op records per step or no step period (ns).
inline constexpr double kMinCpuOpsPerStep = 10;
std::optional<ProfilerCost> profiler_cost(const trace::ProfilerRecords& p, double period_ns);

struct CpuSide {
  // scaled_to_measured: the CPU's own time scaled by cpu_time_scale so that the replayed step is the measured
  // untraced step (a measurement that supports only part of the traced waits).
  enum class Reading { as_traced, tracer_cost_out, gpu_bound, scaled_to_measured };
  Reading reading = Reading::as_traced;
  bool as_traced = true;   // reading == as_traced (an untraced measurement supports the CPU side, or no graph)
  std::string evidence;    // what supports the traced CPU side, or why the step is replayed otherwise (words)
  double traced_step_ns = 0;     // the baseline step replayed with the traced CPU side, ns (modelled)
  double replayed_step_ns = 0;   // the same in the reading taken, ns (modelled); = traced_step_ns when as_traced
  double gpu_bound_step_ns = 0;  // the same replayed GPU-bound, ns (modelled; set where a measured step was weighed)
  double cpu_time_scale = 1;     // the factor the CPU's own time was scaled by (1: as traced, 0: GPU-bound)
  // Where the step is replayed GPU-bound: the chosen strategy (same latency) planned on the traced CPU side, its
  // saving and slowdown against that side's own baseline (modelled; not the plan written).
  std::optional<sim::StrategyResult> if_launch_bound;
  std::optional<sim::SavingParts> if_launch_bound_parts;  // what that saving rests on (its launch-bound waits)
  std::optional<ProfilerCost> profiler;  // what the trace's profiler cost its CPU side (set by the caller)

  std::string line() const;        // the plan table's "CPU side" line
  nlohmann::json to_json() const;  // the JSON report's "cpu_side"
};

// Decides the CPU side for `w` (the workload as built): `measured_by` names the untraced measurement that supports
// the traced CPU side ("" none); `gearshift_traced`: the trace is gearshift's own tracer's (its cost per call
// known). Without a measurement and with a dependency graph, sets w's CPU reading (cpu_time_scale,
// cpu_less_per_event_ns) and says so. `measured_step_ns` (> 0), the untraced step that measurement is, ns: where
// the step replayed as traced is longer by more than kCpuSideMeasuredTolerance, only what it supports is taken
// (Reading::scaled_to_measured, or gpu_bound where even the GPU-bound replay is no shorter). `m`: the model the
// baselines are simulated with.
CpuSide decide_cpu_side(model::Workload& w, const model::DvfsModel& m, const std::string& measured_by,
                        bool gearshift_traced, double measured_step_ns = 0);

// A measured untraced step within this share below the traced replay supports the CPU side as traced: the
// scatter of a measured mean step over 10+ iterations (the shipped traces' meta) is of this order.
inline constexpr double kCpuSideMeasuredTolerance = 0.005;

// Where `c` replayed the step GPU-bound: plans `chosen`'s strategy at its latency on `w` with the traced CPU side
// (cpu_time_scale 1) under the same budget, into c.if_launch_bound.
void plan_if_launch_bound(CpuSide& c, const model::Workload& w, const model::DvfsModel& m, sim::EvaluateOptions eo,
                          const sim::StrategyResult& chosen);

}  // namespace gearshift::service
