// The job's step length once every kernel's activity is no longer recorded, from its launch rate.
//
// `run --auto` learns the step from the kernels of a warm-up in which CUPTI recorded every kernel; that
// recording costs the launching thread time, so a launch-bound job runs slower then (measured on an H200: a
// MoE's traced steps 60 % longer than its untraced ones, docs/benchmarks.md). Once recording stops, the job's
// launch feed still names every launch with its CPU time: launches per step (counted in the traced steps) over
// launches per second (counted after recording stopped) is the untraced step. A job in a steady loop launches
// as fast as its GPU drains the queue (GPU-bound) or as its CPU allows (launch-bound): either way its launch
// rate is its step rate. Launches outside the steps (logging, evaluation) count in both, at the same rate.
// Launches come in bursts (a step's launches, then a wait), so the rate is taken over spans of one step's worth
// of launches (k = launches per step, rounded): the median of t[i + k] - t[i] over all i, which a window's
// partial bursts at its ends do not bias.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::runtime {

// Launch calls per step in `t`'s detected steps `an` (distinct correlation ids of the ops from the first step's
// start to the last step's start, over the steps between; a CUDA graph launch counts once). nullopt with fewer
// than two steps or no op with a correlation id.
std::optional<double> launches_per_step(const trace::Trace& t, const trace::IterationAnalysis& an);

struct UntracedStepOptions {
  double settle_ns = 300e6;      // launches this soon after recording was asked to stop are not counted, ns
  double min_window_ns = 1e9;    // count launches over at least this long, ns
  std::size_t min_steps = 8;     // and over at least this many steps of launches
};

class UntracedStep {
 public:
  static constexpr std::size_t kMaxLaunches = std::size_t{1} << 22;  // launches kept at most (32 MiB)
  // `stop_ns`: when the job was asked to stop recording (the launch clock, CLOCK_MONOTONIC ns);
  // `launches_per_step` > 0.
  UntracedStep(std::int64_t stop_ns, double launches_per_step, UntracedStepOptions o = {});

  void add_launch(std::int64_t cpu_ns);
  // A synchronize of the job returned at `exit_ns`. A job whose CPU runs ahead of the GPU launches several steps
  // in a burst and then waits in its synchronize (measured: torch.compile's CUDA-graph steps launched at 7 ms per
  // 20.8 ms step, loss.item() every 10 steps): its launch rate is its step rate only over whole cycles from one
  // synchronize to another, so where at least two synchronizes fell in the window the launches are counted
  // from the first launch after the first to the first launch after the last.
  void add_sync(std::int64_t exit_ns);
  // Whether enough launches were counted for period_ns().
  bool done() const;
  // The untraced step, ns: over whole synchronize cycles (add_sync) where there are two, else the median span of
  // k launches in time order scaled to launches_per_step; the window's last tenth left out either way (another
  // thread's launches may not have arrived); 0 before enough launches were counted.
  double period_ns() const;
  std::uint64_t counted() const { return times_.size(); }
  double window_ns() const { return times_.size() > 1 ? static_cast<double>(last_ - first_) : 0; }

 private:
  std::int64_t from_ns_;
  double per_step_;
  UntracedStepOptions o_;
  std::vector<std::int64_t> times_;  // launch times counted, arrival order (not time order: several threads)
  std::int64_t first_ = 0, last_ = 0;  // earliest and latest of them
  std::vector<std::int64_t> syncs_;     // synchronize returns after the settle time
};

}  // namespace gearshift::runtime
