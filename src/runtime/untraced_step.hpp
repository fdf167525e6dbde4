// The job's step length once every kernel's activity is no longer recorded, from its launch rate.
//
// `run --auto` learns the step from the kernels of a warm-up in which CUPTI recorded every kernel; that
// recording costs the launching thread time, so a launch-bound job runs slower then (measured on an H200: a
// MoE's traced steps 60 % longer than its untraced ones, bench/results/2026-12-01-auto-real-jobs.md). Once recording
// stops, the job's launch feed still names every launch with its CPU time: launches per step (counted in the traced
// steps) over launches per second (counted after recording stopped) is the untraced step. A job in a steady loop
// launches as fast as its GPU drains the queue (GPU-bound) or as its CPU allows (launch-bound): either way its launch
// rate is its step rate. Launches outside the steps (logging, evaluation) count in both, at the same rate.
// Launches come in bursts (a step's launches, then a wait), so the rate is taken over whole steps of launches
// (period_ns()), which a window's partial bursts at its ends do not bias.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::runtime {

// Launch calls per step in `t`'s detected steps `an` (distinct correlation ids of the kernels from the first step's
// start to the last step's start, over the steps between; a CUDA graph launch counts once; copies and memsets not
// at all: the launch feed's L lines are kernel launches). nullopt with fewer than two steps or no kernel with a
// correlation id.
std::optional<double> launches_per_step(const trace::Trace& t, const trace::IterationAnalysis& an);

// A kernel that marks the job's steps by its launches: one launched exactly once in every detected whole step
// of `an` (on its device; not a CUDA graph's kernel, whose launch names the graph), the last such in the step;
// its name as the launch feed names it. nullopt when no kernel is. Launches per step vary where the steps come
// in variants (trace/step_variants.hpp): Megatron-LM's iterations launch 2,806 kernels, or 3,098 when they
// clip their gradients, which its early iterations do more often. Counted by launches per step, the untraced
// window's clipping iterations measured 247.9 ms against Megatron's own 263-270 ms (H200, session 24).
std::optional<std::string> step_anchor_name(const trace::Trace& t, const trace::IterationAnalysis& an);

struct UntracedStepOptions {
  double settle_ns = 300e6;      // launches this soon after recording was asked to stop are not counted, ns
  double min_window_ns = 2e9;    // count launches over at least this long, ns
  // and over at least this many steps of launches. A job's occasional slow step (Megatron-LM's logging
  // iteration, every 10th) falls in or out of a short window: 8 steps measured 248.7 ms for an iteration that
  // averaged 257-275 ms in Megatron-LM's own log (H200, bench/results/2026-12-01-s09-graph-kernels.md). Whole steps
  // between synchronizes err by at most one slow step's excess over the steps spanned.
  std::size_t min_steps = 16;
};

class UntracedStep {
 public:
  static constexpr std::size_t kMaxLaunches = std::size_t{1} << 22;  // launches kept at most (32 MiB)
  // `stop_ns`: when the job was asked to stop recording (the launch clock, CLOCK_MONOTONIC ns);
  // `launches_per_step` > 0.
  // `anchored`: the caller marks each launch of the step's anchor kernel (step_anchor_name), and steps are
  // counted by those launches, not by `launches_per_step`.
  UntracedStep(std::int64_t stop_ns, double launches_per_step, UntracedStepOptions o = {}, bool anchored = false);

  // `step_anchor`: the launch is of the step's anchor kernel (only read when anchored).
  void add_launch(std::int64_t cpu_ns, bool step_anchor = false);
  // A synchronize of the job returned at `exit_ns`: the launch after it finds the CPU caught up with the GPU.
  // A job whose CPU runs ahead launches several steps in a burst and then waits in its synchronize (measured:
  // torch.compile's CUDA-graph steps launched at 7 ms per 20.8 ms step, loss.item() every 10 steps), so its
  // launch rate is its step rate only between such points that are whole steps apart.
  void add_sync(std::int64_t exit_ns);
  // Whether enough launches (anchored: steps of anchor launches) were counted for period_ns().
  bool done() const;
  // The untraced step, ns. Between two launches right after synchronizes that lie a whole number m >= 2 of
  // steps of launches apart (the widest m; median over its pairs): their time over m. Whole steps matter: a step
  // launches unevenly (a Megatron-LM optimizer's hundreds of small launches in a few ms), and counting between
  // the first and last of its 444 synchronizes per step, wherever they fell in it, measured 237.8 ms for a
  // 265 ms iteration (H200, bench/results/2026-12-01-s08-staleness.md). Otherwise the median span of half the window's
  // steps of launches in time order. The window's last tenth is left out either way (another thread's launches may not
  // have arrived); 0 before enough launches were counted. Anchored, "whole steps apart" is two such launches at
  // the same number of launches (within 0.5 % of a step's) after the anchor launch before each, m the anchor
  // launches between them; else the median span of half the window's anchor launches over their count.
  double period_ns() const;
  // Whether steps are counted by the anchor kernel: it was asked for, and once a window's worth of steps was
  // launched, the launches per anchor launch are within kAnchorSlack times the traced launches per step (else
  // the anchor is not once a step here, and the launches count the steps).
  bool anchored() const;
  static constexpr double kAnchorSlack = 1.5;
  std::size_t anchors() const { return anchors_; }
  // The window's raw counts for offline analysis (`gearshift run --untraced-dump`): a header line, then one line
  // per launch "L CPU_NS ANCHOR" (arrival order) and per synchronize "S EXIT_NS".
  void write(std::ostream& os) const;
  std::uint64_t counted() const { return times_.size(); }
  double window_ns() const { return times_.size() > 1 ? static_cast<double>(last_ - first_) : 0; }

 private:
  std::int64_t from_ns_;
  double per_step_;
  UntracedStepOptions o_;
  std::vector<std::int64_t> times_;  // launch times counted, arrival order (not time order: several threads)
  std::int64_t first_ = 0, last_ = 0;  // earliest and latest of them
  std::vector<std::int64_t> syncs_;     // synchronize returns after the settle time
  bool anchored_ = false;
  std::vector<bool> is_anchor_;  // anchored: whether each of times_ is a launch of the anchor kernel
  std::size_t anchors_ = 0;       // how many are
  double period_by_anchors_ns() const;
};

}  // namespace gearshift::runtime
