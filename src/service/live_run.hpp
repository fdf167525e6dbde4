// The job of `gearshift run`: the user's job and its launch feed around a runtime::Session. Every CUDA process of
// the job connects to the feed server (runtime/feed_server.hpp); one is followed (with a plan: the first on the
// run's GPU to launch a kernel; --auto: the one the planner picks, service/auto_plan.hpp) and its events reach the
// session's runtime once it runs, the planner before. How the runtime learns the GPU's progress is
// runtime/gpu_progress.hpp; the energy measured while live monitor/run_energy.hpp; --timeline
// report/run_timeline.hpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/nvml.hpp"
#include "launch/child_process.hpp"
#include "monitor/run_energy.hpp"
#include "report/run_timeline.hpp"
#include "runtime/feed_server.hpp"
#include "runtime/gpu_progress.hpp"
#include "runtime/session.hpp"
#include "service/auto_plan.hpp"
#include "service/live_plan.hpp"
#include "service/progress.hpp"
#include "service/verify_run.hpp"

namespace gearshift::service {

struct LiveRunOptions {
  std::vector<std::string> cmd;  // the job: CMD ARGS
  unsigned gpu = 0;              // NVML index of the GPU the job uses
  std::optional<runtime::ClockPlan> plan;  // follow this plan; none: --auto, plan from the warm-up with `ao`
  AutoOptions ao;
  Switching switching;
  runtime::GpuProgress progress = runtime::GpuProgress::markers;
  std::string trace_output;  // also keep the job's trace file here ("" none)
  std::string timeline;      // write the intended changes as a timeline here ("" none)
  std::string dry_run_log;   // where the dry-run log went (the summary names it)
  // A plan of one clock pair: how long to follow the job once its pair is set before its launch feed is turned
  // off, ns (runtime/gpu_progress.hpp). Not with trace_output (the trace is of the whole job).
  std::int64_t one_pair_follow_ns = runtime::kOnePairFollowNs;
  // The run's notes (service/progress.hpp); also --auto's lines where `ao` has no sink of its own. Empty: none.
  ProgressSink progress_sink;
  // Measured verification of the plan on the job (service/verify_run.hpp). Where the session applies clocks its
  // blocks alternate the plan and the baseline on the GPU; in a dry run they are intended (the job's noise floor).
  VerifyOptions verify;
};

// The GPU spec --auto plans for: `given` (--gpu-spec), else the one named like NVML's device `index` of `infos`,
// else h200 (dry-run only: with `apply` the clocks must come from the GPU's own table; ServiceError(kBadArgument)
// then, and for an unknown `given`). Where it falls back to h200 it says so to `progress_sink`.
std::string auto_gpu_spec(const std::string& given, const std::vector<gpu::DeviceInfo>& infos, unsigned index,
                          bool apply, const ProgressSink& progress_sink = {});

class LiveRun {
 public:
  // `infos`: NVML's devices (empty without NVML: plain indices map each process's CUDA ordinals to GPUs).
  // Throws SessionError(kFailure) when the feed's socket cannot be made.
  LiveRun(LiveRunOptions o, runtime::Session& session, std::vector<gpu::DeviceInfo> infos);
  ~LiveRun();
  LiveRun(const LiveRun&) = delete;
  LiveRun& operator=(const LiveRun&) = delete;

  // Runs the job to its end (the calling thread; sets the job's environment first: call before any other thread
  // starts); the feed is read to its end too.
  launch::ChildExit run_job();

  // After session.stop(): who fed, what the runtime did, the timeline written; lines for stderr.
  std::string summary(const runtime::SessionStats& ss) const;
  // `run --prometheus`: the measured verification's gauges (LiveVerifier::prometheus_text), none before the
  // verifier starts (--auto: after its warm-up). Any thread, while this LiveRun lives.
  std::string prometheus_text() const;

 private:
  bool on_run_gpu(const runtime::FeedProcess& p) const { return p.gpu && *p.gpu == o_.gpu; }
  void on_plan(const runtime::ClockPlan& made, std::uint32_t source);
  void on_event(const runtime::FeedProcess& p, const feed::FeedEvent& e);
  void on_live_event(const runtime::LiveRuntime& rt);
  std::string feed_summary() const;
  std::string stats(const runtime::SessionStats& ss) const;
  std::string guard_line(const runtime::LiveStats& st) const;
  std::string write_timeline() const;
  void start_verifier(const runtime::ClockPlan& plan);

  LiveRunOptions o_;
  runtime::SchedulerOptions so_;
  runtime::Session& session_;
  runtime::FeedServer server_;
  runtime::ProgressControl progress_;
  monitor::RunEnergy energy_;  // measured J per live step (NVML's counter, read only)
  std::unique_ptr<AutoPlanner> planner_;
  const bool follow_first_;
  std::optional<report::ClockAnchor> anchor_;  // the first completed kernel of the followed process (--timeline)
  std::string no_plan_;                        // --auto: why no plan was made
  std::int64_t pair_set_ns_ = -1;              // reader thread: when a one-pair plan's pair was first set (steady)
  std::uint64_t pair_set_step_ = 0;            // the runtime's step count then
  // Made before the session starts (the feed reader reads it once the runtime is live).
  std::unique_ptr<LiveVerifier> verifier_owner_;
  std::atomic<LiveVerifier*> verifier_{nullptr};
};

}  // namespace gearshift::service
