// The workload the planner and the simulator share: one training step's template, each op annotated with its
// kernel class, DVFS coefficients, reference clocks and pass (forward / backward / optimizer).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/dvfs_model.hpp"
#include "trace/iteration.hpp"

namespace gearshift::model {

enum class Pass { forward, backward, optimizer };
const char* to_string(Pass p);

struct WorkloadOp {
  std::string name;
  trace::OpKind kind = trace::OpKind::kernel;
  KernelClass cls = KernelClass::other;
  KernelCoefficients coeffs;
  Pass pass = Pass::forward;
  std::int32_t stream = 0;
  double ref_time_ns = 0;     // measured mean duration at the reference clocks, ns
  ClockPair ref;              // clocks it ran at while traced (sampled, or the capped default clock)
  bool ref_sampled = false;   // true when the trace sampled the clock
  double start_offset_ns = 0; // mean start relative to the step start, ns
  double gap_before_ns = 0;   // idle time on its stream before it, ns (clock-independent: CPU launch bound)
  std::uint32_t graph_id = 0;      // CUDA graph it runs in (0: launched on its own)
  std::int64_t graph_launch = -1;  // the step's graph launch it belongs to (0, 1, ...), -1: none
  // CPU time of its launch call relative to the step start, ns (trace::TemplateOp::launch_offset_ns); valid
  // when launch_known. What the dependency-driven replay (sim/step_graph.hpp) starts from.
  double launch_offset_ns = 0;
  bool launch_known = false;
  std::optional<double> ref_launch_ns;  // trace::TemplateOp::ref_launch_ns: the CPU's launch order
  // Share of the power limit's averaging window that ends as this op ends spent idle, in [0, 1): the window's
  // gaps between the step's busy spans (every stream), less each gap's first τ·(1 − e^(−G/τ)) ns, which the
  // board spends falling from the kernel's power (DvfsModel::gap_tail_ns). Taken from the traced timeline: a
  // plan's slower kernels fill some gaps, which this ignores. 0 where the spec gives no window.
  // DvfsModel::power_limit_w turns it into the limit this op's kernel meets.
  double window_idle_share = 0;
};

struct Workload {
  std::vector<WorkloadOp> ops;  // template positions, in start order
  double period_ns = 0;         // traced step time, ns
  double tail_ns = 0;           // idle from the last op's end to the next step's start, ns
  std::size_t kernels = 0;      // kernels per step
  std::vector<trace::TemplateSync> syncs;  // the CPU thread's synchronizes per step, in CPU order
  bool syncs_known = false;     // the trace recorded every synchronize and the steps agree on them
  std::string cpu_note;         // what the template's CPU timeline holds or why not (plain words)
  // The CPU side as the replay takes it (graph/step_graph.hpp, shrink_cpu_time): each stretch d of the CPU's own
  // time between its events (launches, synchronizes) becomes min(d, max(cpu_time_scale * d - cpu_less_per_event_ns,
  // graph::kMinCpuPerEventNs)). 1 and 0: the traced CPU timeline; scale 0: the GPU-bound replay; scale 1 with a
  // per-event cost: a tracer's known cost per call taken out. A profiler slows the CPU side, so the GPU's waits for
  // launches in a profiled trace need not exist without it (issue 46; service/cpu_side.hpp decides).
  double cpu_time_scale = 1;
  double cpu_less_per_event_ns = 0;
};

// Annotate the template: classes and priors (kernel_class.hpp), passes (forward until the first kernel whose
// name says backward/grad, optimizer from the first optimizer-class kernel on), reference clocks (the sampled
// clock when the trace has one, else the model's capped default clock).
Workload build_workload(const trace::Trace& trace, const trace::IterationAnalysis& analysis, const DvfsModel& model);

// Recompute reference clocks that were not sampled (after the model's activity scale changed).
void refresh_reference_clocks(Workload& w, const DvfsModel& model);
// Sets every op's window_idle_share for a power-limit window of `window_ns` (0: every share 0) and a fall to
// idle with time constant `gap_decay_ns` (0: at once), on the step as a repeating period of w.period_ns. Called
// by build_workload; call again after changing ops' start offsets, durations or the period.
void set_window_idle_shares(Workload& w, double window_ns, double gap_decay_ns);
// The model's prediction for op `op` (its reference time, clocks, coefficients and window idle share).
Prediction predict_op(const DvfsModel& model, const WorkloadOp& op, ClockPair requested);

}  // namespace gearshift::model
