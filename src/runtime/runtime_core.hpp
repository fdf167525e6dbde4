// The runtime's core, shared by `gearshift run` (LiveRuntime: wall clock, events from the feed) and `gearshift
// replay` (virtual time, events from a trace): the predictor places each launch, the scheduler turns launches and
// signs of GPU progress into clock changes, and completed kernels are scored against the clocks that held while
// they ran. The clock is the caller's: every time is ns on it, and poll(now) is called after each batch of events
// and at next_wakeup_ns(). Not thread-safe (one driving thread).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/clock_plan.hpp"
#include "runtime/predictor.hpp"
#include "runtime/scheduler.hpp"

namespace gearshift::runtime {

struct LiveStats {
  std::uint64_t launches = 0;
  std::uint64_t scored = 0;         // launches after the first step while locked
  std::uint64_t predicted = 0;      // of those, placed at the position the predictor expected next, by name or
                                    // as a same-class variant of the expected kernel (another GEMM tile shape);
                                    // a step variant's block entered or skipped is expected (Alignment::expected)
  std::uint64_t steps = 0;           // whole steps: RuntimeCore::complete_steps()
  std::uint64_t changes = 0, dropped = 0, merged = 0, late = 0;
  double kernel_ns = 0, in_time_ns = 0;  // completed kernels after the first step; at the intended clocks
  std::uint64_t losses = 0;
  std::uint64_t syncs = 0;          // synchronizes seen (GPU progress without kernel activity)
  std::uint64_t markers = 0;        // stream markers seen (idem)
  // Of the changes' boundaries whose kernel completed in an activity record: its GPU start minus the boundary
  // time the scheduler estimated when it issued the change, ns (the estimate's error; > 0: the kernel came later
  // than estimated). At most kMaxBoundaryErrors kept.
  std::vector<float> boundary_error_ns;
  // The in-time guard (below): whether it sent the plan to its one clock pair, at which step (counted as
  // `steps`), and the window that made it: its steps and its in-time fraction. The *_before_fallback sums split
  // the run's in-time fraction: kernels that started before the runtime acted on the fall-back (its first poll
  // after it), judged against the phase plan's clocks wherever their completion was reported; the rest after.
  bool fell_back = false;
  std::uint64_t guard_windows = 0;  // windows the guard scored (held ones, and the one that fell back)
  std::uint64_t fell_back_at_step = 0, fell_back_window_steps = 0;
  double fell_back_window_in_time = 0;
  double kernel_ns_before_fallback = 0, in_time_ns_before_fallback = 0;
  double prediction_accuracy() const { return scored ? static_cast<double>(predicted) / static_cast<double>(scored) : 0; }
  double in_time_fraction() const { return kernel_ns > 0 ? in_time_ns / kernel_ns : 0; }
};

inline constexpr std::size_t kMaxBoundaryErrors = 100'000;

// The in-time guard, for a plan that carries ClockPlan::in_time_fallback (`run --auto`). The plan's modelled
// saving and step time assume its changes land at their boundaries; when they do not, kernels run at clocks
// planned for others (a slow clock in a phase planned fast costs step time) and the figures are not what runs.
// Measured on an H200 (bench/results/2026-12-01-s10-gap-power.md, session 10): torch.compile's 2-phase plan ran 44.6 %
// of its kernel time at the intended clocks, the MoE's 65.1 %. So the completed kernels are scored in windows of at
// least kGuardWindowSteps steps and kGuardMinKernelSteps steps' worth of kernel time (the plan's positions' summed
// durations; activity is sampled: 200 ms of every 5 s in markers mode). Counted in step periods instead, a job
// whose kernels fill a quarter of its step never completed a window (H200, MoE: 163 live steps, no verdict at
// 74.3 % in time); in the first window below kMinInTime the positions' clocks become the
// fallback pair for the rest of the run (once; the scheduler then has no boundary to time). The first window
// starts with the first kernel that starts after the plan's first change landed: before it no kernel could be
// at the plan's clocks (torch.compile's 0-change plan tripped the guard at 86.4 % on its first window, 2026-12-03).
// kMinInTime is the in-time target of issue 15 (95 %).
inline constexpr double kMinInTime = 0.95;
inline constexpr std::uint64_t kGuardWindowSteps = 10;
inline constexpr double kGuardMinKernelSteps = 2;

// "N boundaries timed by activity: kernel start minus estimate median +a ms, 10-90 % [b, c] ms", or "no change
// boundary timed by activity" when `errors_ns` is empty.
std::string describe_boundary_errors(std::vector<float> errors_ns);

class RuntimeCore {
 public:
  // `plan` is used as given (LiveRuntime passes plan.kernels_only(): launch events are kernel launches).
  RuntimeCore(const ClockPlan& plan, SchedulerOptions options, PredictorOptions predictor = {});
  RuntimeCore(const RuntimeCore&) = delete;  // the scheduler holds a reference to plan_
  RuntimeCore& operator=(const RuntimeCore&) = delete;

  // A launch (correlation: the launch call's id, increasing; entered at cpu_ns, < 0 unknown). By name, or by
  // the predictor's id and class (replay resolves names once). Returns where the predictor placed it.
  Alignment on_launch(std::string_view name, std::int64_t correlation, std::int64_t cpu_ns);
  Alignment on_launch(std::int32_t id, model::KernelClass cls, std::int64_t correlation, std::int64_t cpu_ns);
  // The kernel launched with `correlation` ran from start to end (GPU time on this clock).
  void on_complete(std::int64_t correlation, std::int64_t gpu_start_ns, std::int64_t gpu_end_ns);
  // A device/stream synchronize entered and returned: anchors the last launch with a smaller correlation (one
  // of the latest 256: launches from other threads may be handled before it).
  void on_sync(std::int64_t correlation, std::int64_t enter_ns, std::int64_t exit_ns);
  // A stream marker after the launch with `correlation`: its kernel ended between the two times.
  void on_marker(std::int64_t correlation, std::int64_t not_before_ns, std::int64_t seen_ns);
  void set_anchor_on_completions(bool on) { sched_.set_anchor_on_completions(on); }
  // Whether a sign of GPU progress anchored the scheduler yet (ActuationScheduler::anchored).
  bool anchored() const { return sched_.anchored(); }

  // The changes to issue now; each is taken to land at now + L (the in-time accounting's clocks).
  std::vector<ClockChange> poll(std::int64_t now_ns);
  std::optional<std::int64_t> next_wakeup_ns() const { return sched_.next_wakeup_ns(); }

  // When each requested clock pair took effect (time, clocks), from the default clocks at -inf on; ascending.
  const std::vector<std::pair<double, model::ClockPair>>& landings() const { return landings_; }
  // The figures so far (changes, steps and losses filled in).
  LiveStats stats() const;
  // Steps the placed launches touched, from the first placed one's to the last's, both counted whole; 0 before
  // any launch was placed. It rises by one when a step's first launch is placed (position 0, or the first one
  // placed in that step).
  std::uint64_t steps() const;
  // Steps the job ran whole, as far as the runtime can tell: steps in which a launch was placed (locked, by name:
  // not a same-class substitute, not a step variant's insertion) among the last tenth of the step's launches
  // (launch order; at least its last launch).
  // It rises when the first such launch of a step is placed. Work that starts like a step and stops short of its
  // end (an evaluation's forward passes, the kernels of a job's exit) is no step; steps() counted it: the fake job's
  // 1.5 s of other kernels after its 100 steps made 103 (Run.EnergyPerStepLeavesOutWorkAfterTheLastStep).
  std::uint64_t complete_steps() const { return complete_steps_; }
  // Whether the in-time guard sent the plan to its one clock pair (LiveStats::fell_back).
  bool fell_back() const { return stats_.fell_back; }
  // Replaces every position's clocks (measured verification's arms, verify/controller.hpp: a rung of the plan, or
  // the baseline clocks), in the plan's position order; the scheduler times the new boundaries from the next poll.
  // Refused (false) with another count of positions, or once the in-time guard fell back (its one pair stays).
  bool set_position_clocks(const std::vector<model::ClockPair>& clocks);
  const PositionPredictor& predictor() const { return pred_; }
  // The plan position the next launch is expected at, absolute; -1 while searching.
  std::int64_t next_position() const { return to_plan(pred_.next_position()); }
  const ClockPlan& plan() const { return plan_; }

 private:
  // `a` from the predictor (its positions in launch order), returned with the plan's positions.
  Alignment placed(Alignment a, std::int64_t expected, std::int64_t correlation, std::int64_t cpu_ns);
  std::int64_t to_plan(std::int64_t abs) const;  // a predictor position (launch order) as the plan's
  void guard(double start_ns);  // the in-time guard, after each scored completion (its GPU start)

  ClockPlan plan_;  // its clocks change once, when the in-time guard falls back
  std::vector<std::size_t> order_;  // the predictor's template index -> the plan's position (launch order)
  PositionPredictor pred_;
  ActuationScheduler sched_;
  double latency_ns_;
  struct Placed {
    std::int64_t correlation = -1, abs = -1;  // absolute position, -1: not placed
    bool variant = false;                     // an inserted launch of a step variant (Alignment::variant)
  };
  std::vector<Placed> corr_pos_;  // ring: correlation -> where its launch was placed
  // The latest launches (correlation, position or -1), newest last.
  std::vector<std::pair<std::int64_t, std::int64_t>> recent_;
  std::vector<std::pair<double, model::ClockPair>> landings_;
  std::vector<std::pair<std::int64_t, double>> issued_;  // ring: boundary position -> its estimated time (issue)
  std::int64_t first_abs_ = -1, last_abs_ = -1;
  std::uint64_t complete_steps_ = 0;
  std::int64_t completed_step_ = -1;  // the latest step counted in complete_steps_ (absolute step index)
  // The in-time guard's current window: from this step, with the kernel and in-time ns as they stood then.
  std::uint64_t window_step_ = 0;
  double window_kernel_ns_ = 0, window_in_time_ns_ = 0;
  // The phase plan's clocks per position, kept when the guard falls back, and when the runtime acted on it (its
  // next poll, ns; +inf until then). Activity records arrive in batches, so kernels reported after the decision
  // may have run long before it, at the phase plan's clocks: they are judged against those.
  std::vector<model::ClockPair> phase_clocks_;
  double plan_kernel_ns_ = 0;  // ClockPlan::kernel_ns_per_step, ns
  double fallback_from_ns_ = std::numeric_limits<double>::infinity();
  LiveStats stats_;
};

}  // namespace gearshift::runtime
