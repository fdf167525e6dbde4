// Actuation scheduler: decides when to issue each clock change of the plan.
//
// The GPU runs behind the CPU's launches. From the latest sign of GPU progress (an anchor) and the template's
// start offsets, it estimates when the GPU reaches each upcoming phase boundary and issues the boundary's
// change the switch latency L before it. Changes closer together than the minimum interval are merged (the
// merged span gets the highest clocks of its phases, so it never runs slower than planned); a change that can
// no longer land in time is dropped and counted, unless it raises a clock (then it is issued late: running
// slow is worse than running fast). While the predictor searches, the default clocks are requested.
//
// Anchors:
//  - a completed kernel (its GPU end, from kernel activity), unless it is a collective (NCCL): that runs on
//    its own stream beside the compute stream whose kernels the template's offsets time, and ends when the
//    other ranks let it (modelled, replay of the DDP rank 1 trace: in-time 70.2 -> 72.7 %, others unchanged);
//  - a synchronize the job called: every kernel launched before it was done when it returned;
//  - the first launch after a synchronize: the GPU is idle then, so that kernel starts as it is launched;
//  - a stream marker (cupti/stream_marker.hpp): a value the GPU wrote to host memory after a kernel, seen by a
//    poll; the kernel ended between the poll before and the poll that saw it (the midpoint is taken). Unlike
//    completions, markers anchor whatever anchor_on_completions says: the runtime asks for them to anchor.
// Taking any launch that the estimate placed before its own launch time as an anchor was tried and not kept:
// on the DDP traces it lowered the replayed (modelled) in-time fraction (97.4 -> 94.7 % on rank 0; gaps absorb
// such delays). Only the first launch after a CPU stall (kCpuStallNs) anchors so.
//
// All times are ns on one clock (wall clock live, virtual time in replay). Not thread-safe: the runtime
// thread (or replay) drives it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/clock_plan.hpp"

namespace gearshift::runtime {

struct SchedulerOptions {
  double switch_latency_ns = 0;  // L: a change lands this long after it is issued, ns
  double min_interval_ns = 0;    // changes closer than this are merged, ns
  // A change landing later than boundary + this is late, ns. Not 0: a live thread wakes some µs after the
  // issue time it asked for, and a change landing that little after its boundary still serves its phase.
  double late_tolerance_ns = 0.5e6;
  // Never plan beyond the last launch + this many positions; none: one step (the plan's size).
  std::optional<std::int64_t> horizon_positions = std::nullopt;
  // Completed kernels anchor the estimate. Off when kernel activity is only sampled to measure the in-time
  // fraction (their anchors would make the measured kernels look better placed than the rest).
  bool anchor_on_completions = true;
};

// A synchronize that returned this long after it was entered waited for the GPU: the last kernel launched
// before it ended about when it returned. Shorter: the GPU was already idle when it was entered.
inline constexpr double kSyncWaitedNs = 20e3;
// A kernel launched on an idle GPU starts about this long after its launch call was entered (the launch's own
// CPU time; 3.5-4.7 µs per launch on an H200, bench/results/2026-11-30-runtime.md).
inline constexpr double kLaunchToStartNs = 5e3;

// A stalled CPU. By the estimate the GPU finished every launched kernel this long ago, and the job launched nothing
// for this long beyond the pause its traced step had after the last launched position (plan positions' launch
// offsets; a job waiting for its input pauses there every step): a garbage collection, a host-side pause. The
// estimates from the template's offsets assume launches that have not come. Until the next launch no change is
// issued beyond the launched positions, and the first launch after the stall anchors (the GPU is idle: it
// starts kLaunchToStartNs after its launch call, as the first launch after a synchronize does).
// Measured live: a checkpointing job's 200-ms pauses (about one per 10 steps) had changes issued up to 240 ms
// before their kernels started; 56.5 % of its sampled kernel time ran at the plan's clocks and the guard fell
// back (H200, bench/results/2026-12-03-s16-typical-timing.md, session 16).
inline constexpr double kCpuStallNs = 5e6;

// Staleness. The estimate's error grows with the time it is extrapolated over from its anchor, at a rate the
// scheduler measures: at each new anchor, |its end - the end the previous anchor estimated| over the time
// between them (kDriftWeight moving average over spans > kDriftMinSpanNs). An anchor is stale once that rate
// times its age exceeds kStaleDriftNs, but not before kStaleSteps step periods nor after kStaleMaxNs (without
// a measured rate: after kStaleSteps periods). Stale: the default clocks until the next anchor. Measured by
// time, not launches: a CPU that runs ahead (CUDA graphs) launches steps before the GPU reaches its anchor's
// position, and a count in launches sent a torch.compile job to the default clocks 80 % of the time (H200,
// in-time 18.8 %, bench/results/2026-12-01-s08-staleness.md).
inline constexpr double kStaleSteps = 2;
inline constexpr double kStaleDriftNs = 1e6;
inline constexpr double kStaleMaxNs = 1e9;
inline constexpr double kDriftMinSpanNs = 1e6;
inline constexpr double kDriftWeight = 0.1;

struct ClockChange {
  std::int64_t issue_ns = 0;       // when it is (to be) issued, ns
  std::int64_t boundary_ns = 0;    // estimated GPU time of the boundary it serves, ns (issue time for defaults)
  std::int64_t position = -1;      // absolute template position of the boundary; -1: restore defaults
  model::ClockPair clocks;         // MHz
  bool is_default = false;         // the GPU's default clocks (searching / restore)
  bool late = false;               // issued although it lands after its boundary (a raise)
};

struct SchedulerStats {
  std::uint64_t issued = 0, dropped = 0, merged = 0, late = 0;
};

class ActuationScheduler {
 public:
  ActuationScheduler(const ClockPlan& plan, SchedulerOptions options);

  // The predictor placed a launch at absolute position `abs` (-1 / locked=false: searching), entered at `cpu_ns`
  // (same clock as `now`; < 0: unknown). The first launch after a synchronize anchors: the synchronized GPU
  // is idle, so that kernel starts as it is launched (kLaunchToStartNs later), whatever the job did between
  // its steps.
  void on_launch(std::int64_t abs, bool locked, std::int64_t cpu_ns = -1);
  // A kernel at absolute position `abs` ran on the GPU from start to end (ns, same clock as `now`).
  void on_complete(std::int64_t abs, std::int64_t gpu_start_ns, std::int64_t gpu_end_ns);
  // A synchronize entered at `enter_ns` returned at `exit_ns`; `abs` is the position of the last kernel
  // launched before it (-1: not placed).
  void on_sync(std::int64_t abs, std::int64_t enter_ns, std::int64_t exit_ns);
  // A stream marker after the kernel at `abs` was not yet written at `not_before_ns` and was at `seen_ns`
  // (ns, same clock as `now`): the kernel ended in between. Collectives' markers are ignored (see anchors).
  void on_marker(std::int64_t abs, std::int64_t not_before_ns, std::int64_t seen_ns);
  // The changes to issue now (at most a few); call at each event and at next_wakeup_ns().
  std::vector<ClockChange> poll(std::int64_t now_ns);
  // When poll should run next without a new event; nullopt: only on the next event.
  std::optional<std::int64_t> next_wakeup_ns() const { return wakeup_; }

  // Estimated GPU start of absolute position `abs` from the current anchor; nullopt without an anchor.
  std::optional<double> estimate_start_ns(std::int64_t abs) const;
  // Whether any sign of GPU progress anchored the estimate yet (kept across a relock).
  bool anchored() const { return anchor_abs_ >= 0; }
  const SchedulerStats& stats() const { return stats_; }
  // Completed kernels start (or stop) anchoring the estimate (SchedulerOptions::anchor_on_completions).
  void set_anchor_on_completions(bool on) { o_.anchor_on_completions = on; }
  const model::ClockPair& requested() const { return requested_; }
  // The plan's clocks changed (same positions, offsets and durations): its change boundaries are found again and
  // the next poll sets the clocks of the phase the GPU is in. Anchors are kept.
  void plan_changed();

 private:
  double offset(std::int64_t abs) const;           // template start offset of abs from step 0, ns
  double duration(std::int64_t abs) const;         // template duration of abs, ns
  double stale_after_ns() const;                   // an anchor older than this is stale, ns
  bool cpu_stalled(double now_ns) const;           // kCpuStallNs above: the GPU waits for launches that are late
  void anchor(std::int64_t abs, double end_ns);    // abs ended at end_ns, unless an anchor as new says otherwise
  std::int64_t next_change_at_or_after(std::int64_t abs) const;
  model::ClockPair clocks_at(std::int64_t abs) const;

  const ClockPlan& plan_;
  SchedulerOptions o_;
  std::vector<std::size_t> changes_;  // template change positions, ascending
  std::vector<bool> anchors_;         // per template position: its completion may anchor (not a collective)
  bool locked_ = false;
  bool synced_ = false;               // cursor valid for the current lock
  std::int64_t last_launch_ = -1;
  double last_launch_cpu_ns_ = -1;    // CPU time of the latest launch; < 0: unknown
  std::int64_t anchor_abs_ = -1;
  std::int64_t after_sync_abs_ = -1;   // the position a synchronize left the GPU idle before
  double after_sync_exit_ns_ = 0;
  double anchor_end_ns_ = 0;
  double drift_ = -1;                 // estimate error per ns extrapolated (staleness above); < 0: not measured
  std::int64_t cursor_ = 0;           // next change boundary (absolute position) not yet handled
  model::ClockPair requested_;
  bool requested_default_ = true;
  std::optional<std::int64_t> wakeup_;
  SchedulerStats stats_;
};

}  // namespace gearshift::runtime
