// How `gearshift run` learns where the GPU is, and what that costs the job (--gpu-progress).
//
//  - sync (default): the job's own device/stream synchronizes (torch.cuda.synchronize, loss.item()) anchor the
//    runtime's estimate; kernel activity is off until the runtime follows the job (its first synchronize while
//    live), then recorded only in short windows (kAuditWindowMs of every kAuditPeriodMs, counted from then)
//    that measure the in-time fraction. Measured on an H200 (docs/benchmarks.md, 2026-11-30
//    session 3): recording every kernel's activity cost GPT-2 small 1-2 % of its step time, the launch and
//    synchronize callbacks alone were within the run-to-run noise.
//  - activity: every kernel's activity record anchors the estimate (GPU progress at most ~10 ms old) at that
//    cost.
// A job that does not synchronize (or too rarely: the scheduler drops an anchor two steps old) gives sync mode
// nothing to anchor on: after two template steps of launches without one, the job is asked (control pipe,
// cupti/feed_control.hpp) for every kernel's activity and the runtime anchors on it from then on (one way:
// synchronizes that resume later are not switched back to). `run --auto` collects every kernel until its plan exists (it needs their
// durations), then samples.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "runtime/feed.hpp"
#include "runtime/live.hpp"

namespace gearshift::cli {

enum class GpuProgress { sync, activity };

inline constexpr int kAuditPeriodMs = 5000;
inline constexpr int kAuditWindowMs = 200;
inline constexpr std::uint64_t kNoSyncFallbackSteps = 2;

class ProgressControl {
 public:
  // `control_fd`: the write end of the control pipe (ours; non-blocking; closed by the destructor); -1: none.
  ProgressControl(GpuProgress mode, int control_fd);
  ~ProgressControl();
  ProgressControl(const ProgressControl&) = delete;
  ProgressControl& operator=(const ProgressControl&) = delete;

  // The job's environment before it starts (setenv: before any thread). `collect_first`: --auto, every kernel
  // until plan_ready(). Sampling variables the user set are kept, and no window command overrides them.
  void set_job_env(bool collect_first);

  // Whether completed kernels anchor a runtime started now.
  bool anchor_on_completions() const { return mode_ == GpuProgress::activity || switched_.load(); }

  // The plan's kernels per step (before its runtime goes live).
  void set_template_kernels(std::size_t n) { template_kernels_ = n; }

  // Every feed event (the reader thread); `rt` is the live runtime or null (not yet planned). In sync mode the
  // first synchronize while live starts the sampled windows; a live job that launches kNoSyncFallbackSteps
  // template steps without synchronizing gets every kernel's activity instead.
  void on_event(const runtime::FeedEvent& e, runtime::LiveRuntime* rt);

  // --auto: the plan exists and its runtime `rt` starts (the planner's thread). In sync mode with
  // synchronizes seen during the warm-up, sampling starts; without any, every kernel's activity stays on.
  void plan_ready(runtime::LiveRuntime& rt);

  // One line for the exit summary.
  std::string summary() const;

 private:
  void send(int period_ms, int window_ms);
  void fall_back(runtime::LiveRuntime& rt);

  GpuProgress mode_;
  int fd_;
  std::mutex write_mu_;
  std::atomic<std::uint64_t> syncs_{0};
  std::atomic<bool> switched_{false};
  std::atomic<bool> sampling_{false};  // the sampled windows were asked for
  bool user_sampling_ = false;         // the user's GEARSHIFT_FEED_ACTIVITY_* settings are in force
  std::atomic<std::size_t> template_kernels_{0};
  std::uint64_t launches_since_sync_ = 0;  // reader thread only: live launches since the last S line
};

}  // namespace gearshift::cli
