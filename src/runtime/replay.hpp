// Replay: drives the runtime's core (runtime_core.hpp: the predictor and the scheduler, as `gearshift run` does)
// with a recorded trace's kernel launch stream in virtual time (no GPU), optionally perturbed, and scores it. The virtual clock is the trace's (ns). Launch times come from
// the trace when it has them, else start − cpu_lead (the CPU running ahead of the GPU). A kernel's activity
// record reaches the runtime activity_delay after it ends. Ground truth: each detected step's ops are aligned
// to the plan's positions by name (longest common subsequence); ops outside steps, and inserted ops, have none.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/actuator.hpp"
#include "runtime/clock_plan.hpp"
#include "runtime/predictor.hpp"
#include "runtime/scheduler.hpp"
#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::runtime {

struct Perturbation {
  double drop = 0, insert = 0, swap = 0;  // probabilities per launch, 0..1
  std::uint64_t seed = 1;
};
// Parses "drop=0.01,insert=0.01,swap=0" (values in 0..1, or with % as percent). Throws std::invalid_argument.
Perturbation parse_perturbation(const std::string& text);

// The plan is not this trace's job: its positions (name and kind, in order) and the trace's step template share
// less than ReplayOptions::min_plan_match of the longer one. A bad input (the plan), not a runtime failure.
class PlanMismatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The share of the longer of (plan positions, trace template) whose names and kinds align in order with the other
// (plan::position_match_share; memcpy and memset count as one kind: the runtime's plan keeps only "not a kernel").
double plan_match_share(const ClockPlan& plan, const trace::Trace& trace, const trace::IterationAnalysis& analysis);

// The steps' alignments to a plan's positions (an LCS of op names, most of a replay's time and memory), kept by
// replay() to be reused when it replays the same steps against a plan of the same positions again, as the
// in-time check does for each rung of its ladder. Keyed by content: a different step or plan is aligned anew.
struct StepAlignments {
  struct Entry {
    std::vector<std::int32_t> ops, tmpl;  // the step's op ids, the plan's position ids
    std::vector<std::int64_t> truth;      // per op of the step: its matched position, -1 none
  };
  std::vector<Entry> entries;
};

struct ReplayOptions {
  // Below this plan_match_share the plan is refused (PlanMismatchError). The ranks of one data-parallel job share
  // 0.93 (ddp2 gpt2-medium rank 0 vs 1); GPT-3 XL vs GPT-2 medium, both 24 layers, 0.68; 0 accepts any plan.
  double min_plan_match = 0.8;
  SchedulerOptions scheduler;
  PredictorOptions predictor;
  Perturbation perturb;
  double cpu_lead_ns = 2e6;        // launch = start − this when the trace has no launch times, ns
  double activity_delay_ns = 1e6;  // completion known this long after the kernel ends, ns
  // Sampled activity (a study of recording kernel activity only part of the time, to cut CUPTI's per-kernel
  // cost): with a period > 0 only kernels starting in the first `activity_window_ns` of each period (from the
  // first op) report a completion, ns. 0: every kernel does.
  double activity_period_ns = 0;
  double activity_window_ns = 0;
  // GPU progress from the job's synchronizes (`gearshift run --gpu-progress sync|markers`); completions then do
  // not anchor. The trace's own when it recorded them all (Trace::syncs_recorded): device and stream
  // synchronizes on the analysed device (or on an unnamed one), each after the last launch whose correlation is
  // smaller (by CPU time where correlations are missing), at its recorded enter and return times; event
  // synchronizes are left out, as live leaves them. Otherwise, or with assume_sync_each_step, one is assumed at
  // the end of every step: entered 10 µs after the step's last launch, returned when its last kernel ends (at
  // once when that ended before).
  bool sync_progress = false;
  bool assume_sync_each_step = false;
  // The launch feed's batching (cupti/runtime_feed.hpp, RuntimeFeed period_us): every event reaches the runtime
  // at the next tick of a grid this fine (from time 0), launches and synchronizes in their queue order, then
  // completions, then the marker seen at that tick; the runtime polls after each batch. 0: each event at once.
  double feed_period_ns = 500e3;
  // Stream markers (with sync_progress, as `gearshift run --gpu-progress markers`): the first kernel launched
  // at least marker_period_ns after the last marker was seen carries one; the feed's writer, polling every
  // marker_poll_ns (on a grid from time 0), sees it at the first poll after the kernel ends. 0: none. ns.
  double marker_period_ns = 0;
  double marker_poll_ns = 500e3;
  // Replay only the first this many detected steps (their launches, and the synchronizes up to the last one's
  // end); 0: every step. A plan's in-time check (service/plan_in_time.hpp) bounds its cost with it.
  std::size_t max_steps = 0;
  // Where given, alignments are taken from and added to it (not shared between threads).
  StepAlignments* alignments = nullptr;
};

// Where replay's synchronizes came from: none (activity mode), the trace's recorded ones, or one per step assumed
// because the trace does not hold them (a tracer before trace format version 2, a Chrome trace without CUDA
// runtime events).
enum class SyncSource { none, trace, assumed_each_step };
const char* to_string(SyncSource s);  // "none", "trace", "assumed_each_step"

struct ReplayResult {
  // Launches after the first step placed at their true position. Positions inside one run of identical
  // consecutive kernel names count as one (the launch stream cannot tell which of them a missing launch was
  // until the run ends, and they share a phase); strict_position_accuracy does not merge them.
  double prediction_accuracy = 0;
  double strict_position_accuracy = 0;
  double next_kernel_accuracy = 0;  // launches after the first step that the predictor expected (runs merged)
  // The figure `gearshift run` prints as its prediction accuracy (LiveStats::prediction_accuracy: every launch
  // after the first step while locked, the expected ones, no truth needed), so replay and live compare.
  double live_prediction_accuracy = 0;
  double in_time_fraction = 0;      // kernel time after the first step at its intended clocks (given L)
  std::uint64_t changes = 0, dropped_changes = 0, merged_changes = 0, late_changes = 0;
  std::uint64_t steps = 0;          // steps the predictor went through
  std::uint64_t launches = 0, scored_launches = 0;
  std::uint64_t dropped_ops = 0, inserted_ops = 0, swapped_ops = 0;
  std::uint64_t relocks = 0, losses = 0;
  SyncSource sync_source = SyncSource::none;
  std::uint64_t syncs_used = 0;     // synchronizes handed to the runtime (recorded or assumed)
  std::uint64_t syncs_ignored = 0;  // recorded ones left out: event synchronizes, another device's
  std::uint64_t markers = 0;        // stream markers seen
  // Per change boundary whose kernel reported a completion: its start minus the estimate the change was issued
  // for, ns (LiveStats::boundary_error_ns, as `gearshift run` reports them).
  std::vector<float> boundary_error_ns;
};

// Throws trace::NoIterationError when the trace has no steps to score, PlanMismatchError when the plan was made for
// another job.
ReplayResult replay(const trace::Trace& trace, const ClockPlan& plan, const ReplayOptions& options,
                    Actuator* actuator = nullptr);
// The same with the trace's iteration analysis already made (detect_iterations with default options).
ReplayResult replay(const trace::Trace& trace, const trace::IterationAnalysis& analysis, const ClockPlan& plan,
                    const ReplayOptions& options, Actuator* actuator = nullptr);

}  // namespace gearshift::runtime
