// How `gearshift run` learns where the GPU is, and what that costs the job (--gpu-progress).
//
//  - markers (default): stream markers (cupti/stream_marker.hpp: the GPU writes a number to host memory after
//    one kernel every kMarkerPeriodUs) and the job's own synchronizes anchor the runtime's estimate;
//  - sync: the job's device/stream synchronizes only (torch.cuda.synchronize, loss.item()): one anchor per
//    step, so boundaries late in a long step are estimated from the template's offsets alone;
//  - activity: every kernel's activity record anchors the estimate (GPU progress at most ~10 ms old), at
//    CUPTI's per-kernel cost: measured on an H200 (bench/results/2026-11-30-gpu-progress.md, 2026-11-30 session 3) 1-2
// % of GPT-2
//    small's step time, the launch and synchronize callbacks alone within the run-to-run noise.
// In markers and sync mode kernel activity is off until the runtime follows the job (its first anchor while
// live), then recorded only in short windows (kAuditWindowNs of every kAuditPeriodNs, counted from then) that
// measure the in-time fraction; those completions never anchor.
// A job that gives no anchor (no synchronize, and markers unavailable) for two template steps of launches made
// while the runtime's predictor follows the job (as of the last launch it handled: not the model's
// initialisation), and for at least kNoAnchorFallbackNs, is
// asked (a control command on its feed connection, feed/protocol.hpp) for every kernel's activity and the runtime
// anchors on it from then on (one way). `run --auto` collects every kernel until its plan exists (it needs their
// durations), then samples.
// A plan of one clock pair for the whole step (ClockPlan::one_pair: no change inside the step) needs a sign of
// GPU progress only until the runtime has set its pair: then no boundary is left to time and no change can be
// late. Its job is told to stop its markers once the runtime holds an anchor, and its kernel activity is never
// sampled (the in-time fraction is then not measured: nothing can miss). What markers and sampled windows cost a
// CPU-bound H200 MoE job was measured at 0 to 9 % of its step time, within the job's own drift
// (bench/results/2026-12-04-one-pair.md, session 21): unresolved, but a plan that needs neither should not pay for
// them. Once that pair is set and the job followed for kOnePairFollowNs more (its J per step measured meanwhile,
// monitor/run_energy.hpp), the job is told to turn its launch feed off (feed/protocol.hpp's O: CUPTI's callbacks
// off), so that nothing of gearshift costs it from then on: the launch and synchronize callbacks alone cost a
// CPU-bound GPT-2 step ~3 % (session 17); a MoE synchronizing ~330 times a step measured +7 to +17 % in five of
// six rounds with them on (sessions 18-21). The runtime then keeps the pair to the job's end, through any work
// outside the step (it no longer sees the job, so it cannot return to the default clocks there); the clocks are
// restored when the job ends, as always.
// The commands go to the followed process only: only its events reach the runtime, and they change what CUPTI
// costs that process. Every other process of the job (other ranks' GPUs, compile workers) is told, once one is
// followed, to record no kernel activity and no markers (others_commands()): nobody reads them then, and their
// cost would slow the job's collectives for nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "feed/protocol.hpp"
#include "model/dvfs_model.hpp"
#include "runtime/clock_plan.hpp"
#include "runtime/live.hpp"

namespace gearshift::runtime {

enum class GpuProgress { markers, sync, activity };

// "markers" / "sync" / "activity"; throws std::invalid_argument for anything else.
GpuProgress parse_gpu_progress(const std::string& name);

// One marker at most every this long: each costs ~0.4-2 µs of the launching thread and ~2 µs of GPU time
// (measured, H200, bench/results/2026-11-30-stream-markers.md, session 4); 2 and 5 ms gave the same modelled in-time
// fraction. (ns; the feed's commands and the injection's environment carry them in µs and ms.)
inline constexpr std::int64_t kMarkerPeriodNs = 5'000'000;
inline constexpr std::int64_t kAuditPeriodNs = 5'000'000'000;
inline constexpr std::int64_t kAuditWindowNs = 200'000'000;
inline constexpr std::uint64_t kNoSyncFallbackSteps = 2;
// ... and for at least this long (launch clock, ns): a job of short steps (20 ms, CUDA graphs) would otherwise
// fall back before its first marker arrived (the marker command reaches the job at its controller's next wake,
// and the marker is seen once the GPU passes it; measured on an H200: torch.compile's GPT-2 fell back so).
inline constexpr std::int64_t kNoAnchorFallbackNs = 1'000'000'000;
// 10 s: the energy counter's 100 ms tick then errs J per step by 1 % at most (data/gpus/h200.json).
inline constexpr std::int64_t kOnePairFollowNs = 10'000'000'000;

class ProgressControl {
 public:
  // `to_followed` sends one command line to the followed process (false: it could not; any thread, must not
  // block).
  ProgressControl(GpuProgress mode, std::function<bool(const std::string&)> to_followed);
  ProgressControl(const ProgressControl&) = delete;
  ProgressControl& operator=(const ProgressControl&) = delete;

  // The job's environment before it starts (setenv: before any thread). `collect_first`: --auto, every kernel
  // until plan_ready(). Sampling and marker variables the user set are kept, and no command overrides them.
  void set_job_env(bool collect_first);

  // Whether completed kernels anchor a runtime started now.
  bool anchor_on_completions() const { return mode_ == GpuProgress::activity || switched_.load(); }

  // The plan its runtime follows, over kernel positions (ClockPlan::kernels_only), before that runtime goes live:
  // its kernels per step, and its one clock pair for the whole step where it has one (ClockPlan::one_pair).
  void set_plan(const ClockPlan& kernels);
  // Whether that plan is one clock pair for the whole step (from the start, or since the in-time guard fell back).
  bool one_pair() const { return one_pair_.load(); }

  // The runtime's in-time guard sent the plan to its fall-back pair (ClockPlan::in_time_fallback; the reader
  // thread, once). From then on the plan is one clock pair, as if it had been one from the start: no sampled
  // activity (it is stopped now), markers stopped once anchored, and the feed turned off once the pair was
  // followed (turn_feed_off). Before, the job kept its markers, sampled windows and callbacks to its end for a
  // plan with nothing left to time (H200: Llama and gradient accumulation fell back at steps 58-81 of 137-230,
  // session 19). A no-op after the first call, and for a plan without a fall-back.
  void fell_back_to_one_pair();

  // Every feed event (the reader thread); `rt` is the live runtime or null (not yet planned). In markers and
  // sync mode the first anchor (synchronize, marker) while live starts the sampled windows; a live job that
  // launches kNoSyncFallbackSteps template steps without one gets every kernel's activity instead.
  void on_event(const feed::FeedEvent& e, LiveRuntime* rt);

  // --auto: the plan exists and its runtime `rt` starts (the planner's thread), following a process that sent
  // `warmup_syncs` synchronizes while collecting. Markers start; in sync mode without synchronizes during the
  // warm-up every kernel's activity stays on, else sampling starts.
  void plan_ready(LiveRuntime& rt, std::uint64_t warmup_syncs);

  // The commands for every process not followed (no kernel activity, no markers, where the user did not set
  // those); "" when none is needed.
  std::string others_commands() const;

  // --auto: whether the job may be told to stop recording every kernel once its step is learnt (not in activity
  // mode, nor when the user set the sampling), and the command that does (no kernel activity until plan_ready).
  bool may_stop_recording() const { return mode_ != GpuProgress::activity && !user_sampling_; }
  static std::string stop_recording_command() { return feed::activity_command(kAuditPeriodNs, 0); }

  // A plan of one pair was set at step `set_step` and the job followed for `followed_ns` since: tells it to turn its
  // launch feed off (once; the reader thread). Not in activity mode, nor where the user set markers or sampling
  // (their settings say they want them). `at_step`: the runtime's step count now. Returns whether it was told.
  bool turn_feed_off(std::uint64_t at_step, std::int64_t followed_ns);
  bool feed_off() const { return feed_off_.load(); }

  // One line for the exit summary.
  std::string summary() const;

 private:
  bool send(const std::string& line);  // false (and a note on stderr) when the job could not be told
  void start_sampling();
  void stop_markers();
  void fall_back(LiveRuntime& rt);

  GpuProgress mode_;
  std::function<bool(const std::string&)> to_followed_;
  std::atomic<std::uint64_t> syncs_{0};
  std::atomic<std::uint64_t> markers_{0};
  bool user_markers_ = false;          // the user's GEARSHIFT_FEED_MARKER_US is in force
  std::atomic<bool> switched_{false};
  std::atomic<bool> one_pair_{false};         // the plan changes no clock inside the step
  std::optional<model::ClockPair> pair_;      // its pair; set before the runtime goes live (or at the fall-back,
                                              // on the reader thread), read by summary() after the run
  std::optional<model::ClockPair> fallback_;  // the plan's in-time fall-back pair; set with the plan
  bool fell_back_ = false;                    // the pair is the fall-back's (reader thread, then summary())
  bool sampling_stopped_ = false;             // the sampled windows were stopped at the fall-back
  std::atomic<bool> markers_stopped_{false};  // the followed job was told to stop its markers
  std::atomic<bool> feed_off_{false};         // ... to turn its launch feed off
  bool feed_off_sent_ = false;                // ... and was (the command reached its connection)
  std::uint64_t feed_off_step_ = 0;           // the step count then; read by summary() after the run
  std::int64_t feed_off_after_ns_ = 0;        // how long after the pair was set
  std::atomic<bool> sampling_{false};  // the sampled windows were asked for
  bool user_sampling_ = false;         // the user's GEARSHIFT_FEED_ACTIVITY_* settings are in force
  std::atomic<std::size_t> template_kernels_{0};
  std::uint64_t launches_since_anchor_ = 0;  // reader thread only: live launches since the last S or M line
  std::int64_t first_since_anchor_ns_ = -1;  // reader thread only: the first of them (launch clock), -1: none
};

}  // namespace gearshift::runtime
