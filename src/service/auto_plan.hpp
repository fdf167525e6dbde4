// `gearshift run --auto`: while the job warms up, collect the launch feed's kernels without touching the clocks,
// one collection per CUDA process of the job (its feed connection), try iteration detection on them about once a
// second, and when the busiest process on the run's GPU has enough steps plan its clocks exactly as `gearshift
// plan` does (plan_trace -> plan.json -> ClockPlan) and hand the plan and that process to the caller, which
// starts the live runtime following it — once the step passes the live check against the process's
// synchronizes and wall period (runtime/step_check.hpp); a step that fails it is never planned for: the warm-up
// keeps learning. A process whose kernels give no steps (a compile worker, a data loader
// that touches CUDA) is never planned, however busy. Events consumed during the warm-up are not replayed to the
// runtime. Past the time or kernel cap it gives up and the job runs on with its clocks untouched.
// A step that passes the live check is not planned for at once: the job is asked to stop recording every
// kernel's activity and its untraced step is measured from its launch rate (runtime/untraced_step.hpp); where
// that differs from the traced step by more than max_untraced_disagreement, the template's idle time is
// re-timed to it (trace/idle_rescale.hpp) and planned again, or the step is refused when its kernels alone take
// longer than the untraced step. An untraced step longer than the traced one (recording can only lengthen a step)
// is measured once more first: the job's own slow stretch is not its step.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "monitor/counter_tick.hpp"
#include "runtime/clock_plan.hpp"
#include "runtime/feed.hpp"
#include "runtime/feed_collector.hpp"
#include "runtime/untraced_step.hpp"
#include "service/progress.hpp"
#include "service/warmup_clocks.hpp"
#include "sim/calibration_model.hpp"
#include "sim/measurement.hpp"
#include "trace/iteration.hpp"

namespace gearshift::service {

// The untraced window's energy counter reads calibrate only over at least this long, ns. The counter ticks about
// every 100 ms on an H200 (data/gpus/h200.json): read at its ticks the power over 1 s errs by about 1 %, by plain
// reads (a counter that did not step while read) up to ~10 %, which the calibration's source says; either is far
// closer than the priors' power (above).
inline constexpr std::int64_t kMinEnergyWindowNs = 900'000'000;

struct AutoOptions {
  std::size_t warmup_steps = 20;            // detected steps needed before planning
  double max_slowdown = 0;                  // fraction
  std::string gpu_spec = "h200";            // spec name (gpu::find_spec)
  std::optional<double> switch_latency_ns;  // for the phase plan, ns; default: the spec's estimate
  std::string plan_output;                  // write plan.json here too (empty: no)
  std::string untraced_dump;                // write the untraced window's launches here (UntracedStep::write; empty: no)
  std::string job_name;                     // how to name the input in the plan's provenance
  std::int64_t timeout_ns = 600'000'000'000;  // give up after this much warm-up, ns
  std::size_t max_kernels = 1'000'000;      // and after this many ops (kernels, copies) collected, all processes (bounds memory)
  // A warm-up that finds no step at all stops early: once this long has passed since at least no_step_min_ops ops
  // were collected, with no step in any process, it gives up (the job's feed off). From then, not from the job's
  // start: Megatron-LM with 3 microbatches of accumulation spent ~35 s building its model, then reached 20,000
  // ops within 3 iterations, and a bound counted from its start gave up there, 3 iterations in (H100, session 32).
  // Recording every kernel costs a launch-bound job: a T5 seq2seq job with Adafactor ran 32-42 % slower for its whole
  // run while the warm-up recorded every kernel up to the 1 M cap and found nothing (H100, issue 50). A job launching
  // fewer ops than no_step_min_ops pays little for its recording and keeps its chance up to timeout_ns (long steps).
  std::int64_t no_step_timeout_ns = 30'000'000'000;
  std::size_t no_step_min_ops = 20'000;
  std::chrono::milliseconds attempt_period{1000};  // how often detection is tried
  // Measure the untraced step before planning (off: the job keeps recording every kernel, e.g. --gpu-progress
  // activity, so the traced step is its step).
  bool measure_untraced = true;
  runtime::UntracedStepOptions untraced;
  // |untraced step / template step - 1| beyond which the template is re-timed: above the untraced measurement's
  // own error over whole steps (H200, Megatron-LM: 263.0 ms against its log's ~265 ms; the stand-in job on a
  // loaded 2-core machine: up to ~3 %). Was the live
  // check's 10 % while that measurement erred by up to 7 %; a template kept 7 % longer than the job's step (H200,
  // gradient checkpointing: 166.3 ms traced, 155.3 ms untraced) carries tracing's idle gaps into the plan and its
  // calibration (688 W could not be reached over it: refused).
  double max_untraced_disagreement = 0.04;
  // Give up when the untraced step is not measured in this long, ns: the larger of this and the settle time plus
  // three times the untraced window's steps at the traced step (a job of 1 s steps needs 16 s of them).
  std::int64_t untraced_timeout_ns = 10'000'000'000;
  // The run GPU's energy counter (NVML, read only; nullopt when it cannot be read), read at its next tick when
  // asked (monitor/counter_tick.hpp; blocks up to 3 counter periods); empty: none. Read at ticks at the start
  // and end of the untraced step's window (or, where the untraced step is not measured, at every detection
  // attempt over the traced steps; plain reads where they only stand by), it gives the job's measured power that
  // the plan is calibrated to, within the ticks' few ms over the window instead of one 100 ms tick at each end.
  // Without a measured power (and without `model`) nothing is planned: the priors' power modelled 3-4x the
  // saving of the same job's calibrated offline plan on idle-heavy jobs (37.7 vs 9.4 %, H200,
  // bench/results/2026-12-01-s08-staleness.md).
  std::function<std::optional<monitor::CounterAtTick>(bool at_tick)> energy;
  // Other processes on the run GPU that launched at least this share of the planned process's launches while
  // its untraced step was measured: no plan (the clocks would be set for all, the model knows one).
  double max_shared_gpu_share = 0.10;
  // The run GPU's SM and memory clocks (NVML, read only), sampled every WarmupClocks::kPeriodNs while collecting,
  // so that the template's kernels carry the clocks they ran at (service/warmup_clocks.hpp); empty: none.
  ReadClocks clocks;
  std::optional<sim::CalibratedModel> model;  // --model: plan with it (PlanJobOptions::model)
  std::string model_path;
  ProgressSink progress_sink;  // the warm-up's and the plan's lines (service/progress.hpp); empty: none
};

struct PlanJobOptions;
struct PlanJobResult;

class AutoPlanner {
 public:
  // Called once, on the planner's thread, with the plan and the process (feed connection) it was made from; it
  // starts the live runtime following that process. It must not throw.
  using StartLive = std::function<void(const runtime::ClockPlan&, std::uint32_t source)>;
  // Whether process `source` runs on the run's GPU (asked when it has enough steps; any thread).
  using OnRunGpu = std::function<bool(std::uint32_t source)>;
  // Asks process `source` to stop recording every kernel's activity (the planner's thread; must not throw).
  using StopRecording = std::function<void(std::uint32_t source)>;
  // No plan will be made: called once, on the planner's thread, after the reason was said (must not throw).
  // `gearshift run` turns every process's feed off, so that the job runs on as it would without us.
  using GaveUp = std::function<void()>;

  AutoPlanner(AutoOptions options, StartLive start, OnRunGpu on_run_gpu, StopRecording stop_recording,
              GaveUp gave_up = {});
  ~AutoPlanner();
  AutoPlanner(const AutoPlanner&) = delete;
  AutoPlanner& operator=(const AutoPlanner&) = delete;

  // From the feed reader: an event of process `source`; a no-op once planned or given up.
  void add(std::uint32_t source, const feed::FeedEvent& e);
  // The job ended: stops the thread. Returns the line to report when no plan was made (empty when planned).
  std::string finish();

 private:
  enum class State { collecting, measuring, planned, gave_up };
  enum class Outcome { planned, measuring, gave_up, keep_learning };
  struct Attempt {
    std::size_t kernels = 0, copies = 0, steps = 0;  // copies: copies and memsets (the feed's Y lines)
    std::uint64_t launches = 0, unmatched = 0;  // the feed's launch lines; completions without one
    std::string why;  // detection's message when it found nothing
  };
  struct Source {
    runtime::FeedCollector collector;
    Attempt last;
  };
  void loop();
  // Runs iteration detection on `t` (sorted by start); the analysis goes to `*an` (when given) if it found steps.
  Attempt detect(const trace::Trace& t, std::optional<trace::IterationAnalysis>* an = nullptr) const;
  // Plans from `t` and, if the step passes the live check (runtime/step_check.hpp) against the process's
  // synchronizes `syncs`, starts the runtime; a step that fails it: keep_learning (nothing applied or reported
  // but the reason); on a planning failure gives up (the job runs on untouched).
  Outcome plan(trace::Trace t, std::optional<trace::IterationAnalysis> an, const Attempt& a,
               std::vector<std::int64_t> syncs, double seconds, std::uint32_t source);
  // The step passed: measure its untraced length (returns measuring, state measuring), or apply at once when not
  // measured.
  Outcome measure(std::unique_ptr<PlanJobResult> r, PlanJobOptions po, double traced_period_ns,
                  std::int64_t steps_from_ns, std::uint32_t source);
  // The power over the traced steps from `from_ns` on, from the energy counter's readings at the detection
  // attempts; nullopt when they span less than kMinEnergyWindowNs.
  std::optional<sim::MeasuredPower> traced_power(std::int64_t from_ns) const;
  // The untraced step is measured (or its measurement timed out): re-time and plan again where it differs, apply.
  Outcome measured();
  // Writes, reports and applies a plan (state planned); a planning failure gives up.
  Outcome apply(const PlanJobResult& r, const PlanJobOptions& po, std::uint32_t source);
  // apply() for a plan an attempt made without the in-time check (it replays the trace: not on every attempt): made
  // again with it first (PlanJobOptions::check_in_time).
  Outcome apply_checked(PlanJobResult& r, const PlanJobOptions& po, std::uint32_t source);
  // Ends the warm-up without a plan, saying `why`; frees the collected records.
  void give_up(const std::string& why);
  std::string progress(const Attempt& a) const;
  // The attempt to report: of the processes on the run's GPU, the one with most steps, then kernels. Under mu_.
  Attempt best() const;
  std::size_t collected() const;  // ops kept (kernels, copies, memsets), all processes; under mu_
  // "N kernels collected" and, where they differ, of how many launched and how many completions lacked a launch.
  static std::string collected_line(const Attempt& a);

  AutoOptions o_;
  StartLive start_;
  OnRunGpu on_run_gpu_;
  std::chrono::steady_clock::time_point t0_;
  // When the warm-up had first collected no_step_min_ops ops (the no-step bound runs from there), if it has.
  std::optional<std::chrono::steady_clock::time_point> min_ops_at_;
  std::mutex mu_;  // guards the members below
  std::condition_variable cv_;
  bool stopping_ = false;
  State state_ = State::collecting;
  std::map<std::uint32_t, Source> sources_;
  std::string reason_;  // why no plan was made
  std::string check_failed_;  // the last step that failed the live check, and why (empty: none did)
  double last_check_note_s_ = 0;  // planner thread only: when a failed check was last said, s into the warm-up
  double syncs_per_step_ = 0;     // planner thread only: the job's synchronizes per step in the checked warm-up
  static constexpr std::chrono::seconds kCheckNoteEvery{30};
  static constexpr std::size_t kPlanLatestSteps = 20;  // steps the plan is made from (the latest of the warm-up)
  StopRecording stop_recording_;
  GaveUp gave_up_;
  // The energy counter at each detection attempt while collecting: (CLOCK_MONOTONIC ns, J). Planner thread only.
  std::vector<monitor::CounterAtTick> energy_readings_;
  static constexpr std::size_t kMaxEnergyReadings = 4096;
  // The clocks sampled while collecting (null without AutoOptions::clocks); stopped once planned or given up.
  std::unique_ptr<WarmupClocks> clocks_;
  std::size_t clock_sampled_kernels_ = 0;  // planner thread only: the planned template's kernels that got a sample
  std::size_t template_kernels_ = 0;       // planner thread only: its kernels
  // The step being measured untraced (state measuring): its plan so far and the launch-rate meter (under mu_).
  struct Candidate;
  std::unique_ptr<Candidate> cand_;
  std::thread thread_;
};

}  // namespace gearshift::service
