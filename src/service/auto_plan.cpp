#include "service/auto_plan.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <utility>

#include <fmt/core.h>

#include "graph/step_graph.hpp"
#include "service/plan_job.hpp"
#include "plan/plan_file.hpp"
#include "runtime/live.hpp"
#include "runtime/step_check.hpp"
#include "trace/idle_rescale.hpp"
#include "trace/iteration.hpp"

namespace gearshift::service {

namespace {

// Said with the plan when the model replays the CPU's launches but takes the CPU never to wait for the GPU
// although the job synchronized: the warm-up trace holds the job's synchronizes (the feed's S lines), but the
// template could not place them (trace/cpu_timeline.hpp: the steps call different numbers of them, or each
// site recurs in too few steps). The GPU's idle time between launches is then slack that slower kernels fill
// for free; where the job waits on a synchronize it is not. Before the template placed the synchronizes of
// update-delimited steps, `--auto` modelled 1.2-10.2 % at 0.5 % on gradient accumulation (H200, sessions 16 and
// 18) where the same job's kernels replayed with their synchronizes give 1.5 % (MODELLED too). Empty when it does
// not apply.
std::string cpu_wait_caution(const model::Workload& w, double syncs_per_step) {
  if (w.syncs_known || syncs_per_step < 0.5 || !graph::build_step_graph(w).note.starts_with("dependency-driven"))
    return {};
  return fmt::format("gearshift run --auto: caution: the job synchronized {:.1f} times a step in the warm-up, but the "
                     "model places none ({}): the GPU's idle time between launches counts "
                     "as slack that slower kernels fill for free. Where the job waits on those synchronizes it is "
                     "not, so the MODELLED step time is a lower bound and the saving an upper bound",
                     syncs_per_step, w.cpu_note.empty() ? "no synchronize in the collected trace" : w.cpu_note);
}

// How likely the plan's step time overruns the budget, by the class priors' spread (sim/saving_range.hpp): a
// plan near its budget may well be over it (H200 gradient accumulation, session 19: 0.42 % at a 0.5 % budget,
// 65 % of the draws over). plan.json has it too (predicted.p_over_budget). Empty without draws.
std::string over_budget_note(const sim::SavingRange& g) {
  if (g.samples <= 0) return {};
  const std::string outside = sim::expected_outside_range(g);
  return fmt::format(" (P(step time over the budget) {:.0f} %, {} draws of the class priors' spread){}",
                     100 * g.p_over_budget, g.samples, outside.empty() ? "" : "; " + outside);
}

// The one-pair ("iteration") plan of the same evaluation, when it fits the budget: what the in-time guard
// (runtime/runtime_core.hpp) runs once the phase plan's changes are seen not to land in time.
const sim::StrategyResult* one_pair_plan(const PlanJobResult& r) {
  for (const auto& s : r.evaluation.strategies)
    if (s.schedule.strategy == plan::Strategy::iteration && s.within_budget && !s.schedule.clocks.empty()) return &s;
  return nullptr;
}

// `one`: one_pair_plan's result; `fallback`: its pair, or the default clocks without one.
std::string in_time_guard_line(const sim::StrategyResult* one, const model::ClockPair& fallback) {
  return fmt::format(
      "gearshift run --auto: in-time guard: should less than {:.0f} % of the sampled kernel time run at the plan's "
      "clocks over {} steps, the rest of the run takes one clock pair for the whole step: SM {} MHz, memory {} MHz "
      "({})",
      100 * runtime::kMinInTime, runtime::kGuardWindowSteps, fallback.sm_mhz, fallback.mem_mhz,
      one ? fmt::format("the one-pair plan, MODELLED saving {:.2f} % at {:.2f} % step time", one->saving_pct,
                        one->slowdown_pct)
          : std::string("the default clocks: no one-pair plan fits the budget"));
}

// A kernel's name for one line of output: its first 60 characters (templated names run to thousands).
std::string short_kernel_name(const std::string& name) {
  return name.size() <= 60 ? name : name.substr(0, 57) + "...";
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
std::int64_t ns_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

struct AutoPlanner::Candidate {
  std::unique_ptr<PlanJobResult> r;
  PlanJobOptions po;
  std::uint32_t source = 0;
  double traced_period_ns = 0;  // the template's step (what the runtime's offsets time), ns
  std::int64_t stop_ns = 0;     // when the job was asked to stop recording (CLOCK_MONOTONIC), ns
  double launches_per_step = 0;  // in the traced steps (runtime::launches_per_step)
  std::string anchor;            // the kernel whose launches count the steps (runtime::step_anchor_name); "": none
  runtime::UntracedStep meter;
  std::int64_t energy_from_ns = -1;        // when the energy counter was first read after the settle time, ns
  std::optional<monitor::CounterAtTick> energy_from;  // that reading
  std::uint64_t others_launches = 0;       // launches of other processes on the run's GPU meanwhile
  bool measured_again = false;             // a first window that could not be the job's step was measured again
  runtime::UntracedStepOptions untraced;   // the window's options (measured again: over more steps)
};

namespace {
// The job's measured power between two counter reads, and how far it can be off; nullopt over a window shorter
// than kMinEnergyWindowNs or without energy.
std::optional<sim::MeasuredPower> power_between(const monitor::CounterAtTick& from, const monitor::CounterAtTick& to,
                                                const char* what) {
  const std::optional<monitor::WindowPower> w = monitor::window_power(from, to);
  if (!w || w->seconds * 1e9 < static_cast<double>(kMinEnergyWindowNs)) return std::nullopt;
  return sim::MeasuredPower{
      w->watts,
      fmt::format("the NVML energy counter over {:.1f} s of {}, {} within {:.1f} %", w->seconds, what,
                  w->located ? "read at two of its ticks:" : "read between its ticks (it did not step while read):",
                  100 * w->error),
      0};
}

// How long the untraced window may take, ns (AutoOptions::untraced_timeout_ns).
std::int64_t untraced_wait_limit_ns(const AutoOptions& o, const runtime::UntracedStepOptions& u,
                                    double traced_period_ns) {
  return std::max(o.untraced_timeout_ns,
                  static_cast<std::int64_t>(u.settle_ns + 3.0 * static_cast<double>(u.min_steps) * traced_period_ns));
}
}  // namespace

AutoPlanner::AutoPlanner(AutoOptions options, StartLive start, OnRunGpu on_run_gpu, StopRecording stop_recording,
                         GaveUp gave_up)
    : o_(std::move(options)),
      start_(std::move(start)),
      on_run_gpu_(std::move(on_run_gpu)),
      t0_(std::chrono::steady_clock::now()),
      stop_recording_(std::move(stop_recording)),
      gave_up_(std::move(gave_up)) {
  if (o_.clocks) clocks_ = std::make_unique<WarmupClocks>(o_.clocks);
  thread_ = std::thread([this] { loop(); });
}

AutoPlanner::~AutoPlanner() { finish(); }

void AutoPlanner::add(std::uint32_t source, const feed::FeedEvent& e) {
  std::lock_guard<std::mutex> g(mu_);
  if (state_ == State::measuring) {
    if (cand_ && source == cand_->source) {
      if (e.kind == feed::FeedEvent::Kind::launch)
        cand_->meter.add_launch(e.cpu_ns, !cand_->anchor.empty() && e.name == cand_->anchor);
      if (e.kind == feed::FeedEvent::Kind::sync) cand_->meter.add_sync(e.gpu_end_ns);
    } else if (cand_ && e.kind == feed::FeedEvent::Kind::launch && on_run_gpu_(source)) {
      ++cand_->others_launches;
    }
    return;
  }
  if (state_ != State::collecting) return;
  auto it = sources_.find(source);
  if (it == sources_.end()) it = sources_.emplace(source, Source{runtime::FeedCollector(o_.max_kernels), {}}).first;
  // The cap holds for all processes together: a full collection stops keeping ops, not counting launches.
  if (collected() >= o_.max_kernels &&
      (e.kind == feed::FeedEvent::Kind::complete || e.kind == feed::FeedEvent::Kind::copy))
    return;
  it->second.collector.add(e);
}

std::size_t AutoPlanner::collected() const {
  std::size_t n = 0;
  for (const auto& [id, s] : sources_) n += s.collector.ops();
  return n;
}

AutoPlanner::Attempt AutoPlanner::best() const {
  const Attempt* b = nullptr;
  for (const auto& [id, s] : sources_) {
    if (!on_run_gpu_(id)) continue;
    if (b == nullptr || s.last.steps > b->steps || (s.last.steps == b->steps && s.last.kernels > b->kernels))
      b = &s.last;
  }
  return b != nullptr ? *b : Attempt{};
}

AutoPlanner::Attempt AutoPlanner::detect(const trace::Trace& t, std::optional<trace::IterationAnalysis>* an) const {
  Attempt a;
  a.copies = static_cast<std::size_t>(std::count_if(
      t.ops.begin(), t.ops.end(), [](const trace::OpRecord& r) { return r.kind != trace::OpKind::kernel; }));
  a.kernels = t.ops.size() - a.copies;
  if (t.ops.empty()) return a;
  try {
    trace::IterationAnalysis found = trace::detect_iterations(t);
    a.steps = found.iterations.size();
    if (an != nullptr) *an = std::move(found);
  } catch (const trace::NoIterationError& e) {
    a.why = e.what();
  }
  return a;
}

std::string AutoPlanner::collected_line(const Attempt& a) {
  std::string s = a.copies > 0 ? fmt::format("{} kernels (and {} copies and memsets) collected", a.kernels, a.copies)
                               : fmt::format("{} kernels collected", a.kernels);
  // A launch still running when the snapshot was taken is not collected yet: only a gap of more than 1 % says
  // that completions went missing (e.g. a launch path the feed does not name).
  if (a.launches > a.kernels + a.kernels / 100 || a.unmatched > 0)
    s += fmt::format(" of {} launched ({} completions without a launch)", a.launches, a.unmatched);
  return s;
}

std::string AutoPlanner::progress(const Attempt& a) const {
  if (a.kernels == 0)
    return "no kernel came through the launch feed (no CUDA work yet, or no tracer in the job: see any warning "
           "above)";
  std::string s = fmt::format("{}, {} steps detected, {} needed (--warmup-steps)", collected_line(a),
                              a.steps, o_.warmup_steps);
  if (a.steps == 0 && !a.why.empty()) s += ": " + a.why;
  return s;
}

void AutoPlanner::loop() {
  auto next = t0_ + o_.attempt_period;
  for (;;) {
    struct Snapshot {
      std::uint32_t source;
      trace::Trace t;
      std::vector<std::int64_t> syncs;
      std::uint64_t launches, unmatched;
    };
    std::vector<Snapshot> changed;  // processes with new kernels since their last try
    bool full = false, timed_out = false;
    bool measured_now = false, read_energy = false;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait_until(g, next, [&] { return stopping_; });
      if (stopping_) return;
      if (state_ == State::measuring) {
        read_energy = cand_ != nullptr && cand_->energy_from_ns < 0 && o_.energy &&
                      runtime::monotonic_ns() >= cand_->stop_ns + static_cast<std::int64_t>(o_.untraced.settle_ns);
        const std::int64_t waited_ns = cand_ ? runtime::monotonic_ns() - cand_->stop_ns : 0;
        measured_now = cand_ != nullptr && (cand_->meter.done() ||
                                            waited_ns >= untraced_wait_limit_ns(o_, cand_->untraced, cand_->traced_period_ns));
        next = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        if (!measured_now && !read_energy) continue;
      }
    }
    if (read_energy) {  // the untraced window's start (outside the lock: NVML takes some µs)
      const std::optional<monitor::CounterAtTick> e = o_.energy(true);
      const std::int64_t now = runtime::monotonic_ns();
      std::lock_guard<std::mutex> g(mu_);
      if (cand_) cand_->energy_from_ns = now, cand_->energy_from = e;
      if (!measured_now) continue;
    }
    if (measured_now) {
      if (measured() != Outcome::keep_learning) return;
      continue;
    }
    {
      std::unique_lock<std::mutex> g(mu_);
      full = collected() >= o_.max_kernels;
      timed_out = ns_since(t0_) >= o_.timeout_ns;
      for (const auto& [id, src] : sources_)
        if (src.collector.ops() != src.last.kernels + src.last.copies)
          changed.push_back({id, src.collector.snapshot(), src.collector.sync_exits(), src.collector.launches(),
                             src.collector.unmatched()});
      if (changed.empty() && !timed_out) {
        next = std::chrono::steady_clock::now() + o_.attempt_period;
        continue;
      }
    }
    const auto began = std::chrono::steady_clock::now();
    // The traced steps' power, where the untraced step will not be measured: at ticks then; else plain reads
    // stand by for a step whose untraced length cannot be measured (no launch ids), sparing the warm-up a burst of
    // reads (≈4 ms each on an H200) every attempt.
    if (o_.energy)
      if (const std::optional<monitor::CounterAtTick> e = o_.energy(!o_.measure_untraced)) {
        if (energy_readings_.size() >= kMaxEnergyReadings) energy_readings_.erase(energy_readings_.begin());
        energy_readings_.push_back(*e);
      }
    // Outside the lock: the feed reader keeps adding meanwhile. Of the processes on the run's GPU with enough
    // steps, the busiest is planned.
    struct Tried {
      std::uint32_t source;
      trace::Trace t;
      std::optional<trace::IterationAnalysis> an;  // kept for planning: detection is the costly part
      Attempt a;
      std::vector<std::int64_t> syncs;
    };
    std::vector<Tried> tried;
    for (auto& c : changed) {
      runtime::FeedCollector::sort_by_start(c.t);
      // Before detection: the template's ops take their clocks from the trace's. Only a process on the run's GPU
      // is ever planned, and only that GPU's clocks are sampled.
      if (clocks_ && on_run_gpu_(c.source)) clocks_->attach(c.t);
      std::optional<trace::IterationAnalysis> an;
      Attempt a = detect(c.t, &an);
      a.launches = c.launches;
      a.unmatched = c.unmatched;
      tried.push_back({c.source, std::move(c.t), std::move(an), std::move(a), std::move(c.syncs)});
    }
    Tried* pick = nullptr;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto& x : tried) {
        sources_.at(x.source).last = x.a;
        // Kernels are what the runtime follows: a process of copies alone has steps but nothing to plan.
        if (x.a.steps >= o_.warmup_steps && x.a.kernels > 0 && on_run_gpu_(x.source) &&
            (pick == nullptr || x.a.kernels > pick->a.kernels))
          pick = &x;
      }
    }
    if (pick != nullptr) {
      const Outcome out =
          plan(std::move(pick->t), std::move(pick->an), pick->a, std::move(pick->syncs), seconds_since(t0_), pick->source);
      if (out == Outcome::measuring) {  // the untraced step is measured next
        next = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        continue;
      }
      if (out != Outcome::keep_learning) return;
      if (full || timed_out) {
        std::string failed;
        {
          std::lock_guard<std::mutex> g(mu_);
          failed = check_failed_;
        }
        give_up(fmt::format(
            "gave up after {}: {}",
            full ? fmt::format("{} kernels and copies", o_.max_kernels)
                 : fmt::format("{:g} s of warm-up (--warmup-timeout)", static_cast<double>(o_.timeout_ns) * 1e-9),
            failed));
        return;
      }
    } else {
      Attempt b;
      std::size_t ops = 0;
      {
        std::lock_guard<std::mutex> g(mu_);
        b = best();
        ops = collected();
      }
      // No step anywhere after the no-step bound (AutoOptions::no_step_timeout_ns), counted from when the warm-up
      // had collected no_step_min_ops ops: recording on costs the job.
      if (!min_ops_at_ && ops >= o_.no_step_min_ops) min_ops_at_ = std::chrono::steady_clock::now();
      const bool no_step = b.steps == 0 && min_ops_at_ && ns_since(*min_ops_at_) >= o_.no_step_timeout_ns;
      if (full || timed_out || no_step) {
        const double s = seconds_since(t0_);
        std::string why =
            full       ? fmt::format("gave up after {} kernels and copies without enough steps", o_.max_kernels)
            : no_step  ? fmt::format("gave up after {:.0f} s of warm-up and {} ops with no training step found in "
                                     "any process, {:.0f} s after its first {} ops (--warmup-no-step-s {:g}; "
                                     "recording every kernel costs the job, so it stops here)",
                                     s, ops, seconds_since(*min_ops_at_), o_.no_step_min_ops,
                                     static_cast<double>(o_.no_step_timeout_ns) * 1e-9)
                       : fmt::format("gave up after {:g} s of warm-up (--warmup-timeout)",
                                     static_cast<double>(o_.timeout_ns) * 1e-9);
        give_up(why + ": " + progress(b));
        return;
      }
    }
    // Detection costs more as the trace grows: at least twice its last run time between attempts.
    next = std::chrono::steady_clock::now() + std::max<std::chrono::steady_clock::duration>(
                                                  o_.attempt_period, 2 * (std::chrono::steady_clock::now() - began));
  }
}

void AutoPlanner::give_up(const std::string& why) {
  if (clocks_) clocks_->stop();
  {
    std::lock_guard<std::mutex> g(mu_);
    state_ = State::gave_up;
    reason_ = why + "; the job ran on with its clocks untouched";
    sources_.clear();  // frees the records
    say(o_.progress_sink, fmt::format("gearshift run --auto: {}; continuing as a pass-through{}", why,
                                      gave_up_ ? " (the job's launch feed turned off)" : ""));
  }
  if (gave_up_) gave_up_();
}

AutoPlanner::Outcome AutoPlanner::plan(trace::Trace t, std::optional<trace::IterationAnalysis> an, const Attempt& a,
                                       std::vector<std::int64_t> syncs, double seconds, std::uint32_t source) {
  PlanJobOptions po;
  po.display_name = o_.job_name;
  po.gpu = o_.gpu_spec;
  po.max_slowdown = o_.max_slowdown;
  po.strategy = plan::Strategy::phase;
  po.switch_latency_ns = o_.switch_latency_ns;
  po.model = o_.model;
  po.model_path = o_.model_path;
  // The untraced window measures the step without recording (or the live check stops the plan): the CPU side
  // counts as traced (service/cpu_side.hpp).
  po.cpu_measured_by = "run --auto's untraced window and live step check";
  // Where the traced steps' power is what calibrates (no untraced step measured), learn on until the counter's
  // readings span enough of them, before any planning or report (measure() says why if they never do).
  if (!o_.measure_untraced && !energy_readings_.empty() && !traced_power(an->iterations.front().start_ns))
    return Outcome::keep_learning;
  try {
    // The plan is made from the latest steps only: the first steps of a job are slower (cuBLAS heuristics, the
    // allocator growing; measured on an H200: a Llama job's template 9 % longer than its median step when its
    // first 37 steps were averaged). The live check compares the modelled step with those steps' wall period, and
    // looks at every step found for the synchronizes.
    const trace::IterationAnalysis all = *an;
    if (all.iterations.size() > kPlanLatestSteps) {
      trace::Trace latest = t;
      const std::int64_t from = all.iterations[all.iterations.size() - kPlanLatestSteps].start_ns;
      std::erase_if(latest.ops, [from](const trace::OpRecord& op) { return op.start_ns < from; });
      try {
        trace::IterationAnalysis found_latest = trace::detect_iterations(latest);
        t = std::move(latest);
        an = std::move(found_latest);
      } catch (const trace::NoIterationError&) {  // the latest steps alone do not hold: plan on all of them
      }
    }
    PlanJobOptions attempt = po;
    attempt.check_in_time = false;  // on the plan applied (apply_checked), not on every attempt
    PlanJobResult r = plan_trace(attempt, std::move(t), std::move(an));
    const auto& it = r.iterations;
    // The live check before anything is applied or reported: a step that fails it gets no plan and no saving.
    const runtime::LiveStepCheck check =
        runtime::check_live_step(all, r.evaluation.baseline.step_time_ns, std::move(syncs),
                                 it.iterations.size() < all.iterations.size() ? it.iterations.size() : 0);
    const std::string found =
        fmt::format("{} steps detected by {} ({} kernels{}, {:.2f} ms per step{}, confidence {:.2f})",
                    all.iterations.size(), it.method, it.tmpl.kernels,
                    it.tmpl.ops.size() > it.tmpl.kernels
                        ? fmt::format(" and {} copies and memsets", it.tmpl.ops.size() - it.tmpl.kernels)
                        : std::string(),
                    it.tmpl.period_ns / 1e6,
                    it.iterations.size() < all.iterations.size() ? fmt::format(" in the latest {}", it.iterations.size())
                                                                 : std::string(),
                    it.confidence);
    if (!check.passed) {
      std::string line = fmt::format("{}: the live check failed: {} ({})", found, check.why, check.evidence);
      // Said the first time, then at most every kCheckNoteEvery (each attempt on a longer warm-up says the same).
      if (last_check_note_s_ == 0 || seconds >= last_check_note_s_ + static_cast<double>(kCheckNoteEvery.count())) {
        say(o_.progress_sink, fmt::format("gearshift run --auto: warm-up {:.1f} s, {}, {}; learning on", seconds,
                                          collected_line(a), line));
        last_check_note_s_ = seconds;
      }
      std::lock_guard<std::mutex> g(mu_);
      check_failed_ = std::move(line);
      return Outcome::keep_learning;
    }
    const std::string warmup = fmt::format("warm-up {:.1f} s, {}, {}", seconds, collected_line(a), found);
    template_kernels_ = clock_sampled_kernels_ = 0;
    for (const auto& op : r.iterations.tmpl.ops) {
      if (op.kind != trace::OpKind::kernel) continue;
      ++template_kernels_;
      clock_sampled_kernels_ += op.sm_clock_mhz > 0;
    }
    say(o_.progress_sink, fmt::format("gearshift run --auto: {}", warmup));
    say(o_.progress_sink, fmt::format("gearshift run --auto: live check passed: {}", check.evidence));
    syncs_per_step_ = static_cast<double>(check.syncs_in_steps) / static_cast<double>(all.iterations.size());
    const double template_ns = r.iterations.tmpl.period_ns;
    return measure(std::make_unique<PlanJobResult>(std::move(r)), po, template_ns, all.iterations.front().start_ns,
                   source);
  } catch (const std::exception& e) {  // Exit, PlanError, allocation: the job must run on regardless
    give_up(std::string("planning failed: ") + e.what());
    return Outcome::gave_up;
  }
}

std::optional<sim::MeasuredPower> AutoPlanner::traced_power(std::int64_t from_ns) const {
  const auto first = std::find_if(energy_readings_.begin(), energy_readings_.end(),
                                  [from_ns](const monitor::CounterAtTick& r) { return r.t_ns >= from_ns; });
  if (first == energy_readings_.end()) return std::nullopt;
  return power_between(*first, energy_readings_.back(), "the traced steps");
}

AutoPlanner::Outcome AutoPlanner::measure(std::unique_ptr<PlanJobResult> r, PlanJobOptions po,
                                          double traced_period_ns, std::int64_t steps_from_ns, std::uint32_t source) {
  const std::optional<double> per_step = runtime::launches_per_step(r->trace, r->iterations);
  if (!o_.measure_untraced || !per_step) {
    if (o_.measure_untraced)
      say(o_.progress_sink,
          "gearshift run --auto: note: the untraced step is not measured (no launch ids in the steps)");
    // The job keeps its recording, so its traced steps are its steps: calibrated to their power.
    po.measured_power = traced_power(r->iterations.iterations.front().start_ns);
    if (!po.measured_power) po.measured_power = traced_power(steps_from_ns);
    // The counter reads, but not yet over 0.9 s of steps: learn on (the next attempt reads it again).
    if (!po.measured_power && !energy_readings_.empty()) return Outcome::keep_learning;
    if (!po.measured_power) return apply_checked(*r, po, source);
    try {
      PlanJobResult r2 = plan_trace(po, std::move(r->trace), std::move(r->iterations));
      return apply(r2, po, source);
    } catch (const std::exception& e) {
      give_up(std::string("planning failed: ") + e.what());
      return Outcome::gave_up;
    }
  }
  const std::int64_t stop = runtime::monotonic_ns();
  // Steps are counted by a kernel launched once in each, where one is: launches per step vary with the steps'
  // variants (runtime/untraced_step.hpp).
  std::string anchor = runtime::step_anchor_name(r->trace, r->iterations).value_or("");
  const bool anchored = !anchor.empty();
  auto c = std::unique_ptr<Candidate>(
      new Candidate{std::move(r), po, source, traced_period_ns, stop, *per_step, std::move(anchor),
                    runtime::UntracedStep(stop, *per_step, o_.untraced, anchored), -1, std::nullopt, 0, false,
                    o_.untraced});
  {
    std::lock_guard<std::mutex> g(mu_);
    cand_ = std::move(c);
    state_ = State::measuring;
    sources_.clear();  // the collected records are planned already
  }
  stop_recording_(source);
  return Outcome::measuring;
}

AutoPlanner::Outcome AutoPlanner::measured() {
  std::unique_ptr<Candidate> c;
  {
    std::lock_guard<std::mutex> g(mu_);
    c = std::move(cand_);  // state_ stays measuring until apply() or give_up(): add() ignores the events meanwhile
  }
  const auto& m = c->meter;
  if (!o_.untraced_dump.empty()) {  // a bench aid: the window as counted, for offline analysis
    std::ofstream dump(o_.untraced_dump, c->measured_again ? std::ios::app : std::ios::trunc);
    m.write(dump);
    if (!dump) say(o_.progress_sink, fmt::format("gearshift run --auto: note: could not write {}", o_.untraced_dump));
  }
  // The job's measured power over the untraced window: what the plan is calibrated to.
  if (o_.energy && c->energy_from)
    if (const std::optional<monitor::CounterAtTick> e = o_.energy(true))
      c->po.measured_power = power_between(*c->energy_from, *e, "the untraced run");
  const std::optional<sim::MeasuredPower> untraced_power = c->po.measured_power;
  // Another process launching on this GPU now shares its clocks: a plan of one would set them for both.
  if (c->others_launches > 0 && static_cast<double>(c->others_launches) >=
                                    o_.max_shared_gpu_share * static_cast<double>(m.counted())) {
    give_up(fmt::format("other processes launched {} kernels on the run's GPU while the planned one launched {} "
                        "(untraced window): a plan of one process would set the clocks of all, and the model knows "
                        "one; no plan",
                        c->others_launches, m.counted()));
    return Outcome::gave_up;
  }
  if (!m.done()) {
    give_up(
        fmt::format("the untraced step could not be measured: {} launches in {:g} s after recording stopped "
                    "(the job's loop paused or ended)",
                    m.counted(), static_cast<double>(untraced_wait_limit_ns(o_, c->untraced, c->traced_period_ns)) * 1e-9));
    return Outcome::gave_up;
  }
  const double pu = m.period_ns(), pt = c->traced_period_ns;
  const double off = pu / pt - 1;
  const std::string line =
      fmt::format("untraced step {:.2f} ms ({} launches in {:.2f} s after recording stopped, {}), traced "
                  "template {:.2f} ms ({:+.1f} %)",
                  pu / 1e6, m.counted(), m.window_ns() * 1e-9,
                  m.anchored() ? fmt::format("steps counted by the {} launches of {}, once in each traced step",
                                             m.anchors(), short_kernel_name(c->anchor))
                               : fmt::format("steps counted as {:.0f} launches each, as traced", c->launches_per_step),
                  pt / 1e6, 100 * off);
  // A second window, from now (no settle needed), over `steps_scale` times the steps.
  auto measure_again = [&](double steps_scale) {
    c->measured_again = true;
    c->untraced.min_steps = static_cast<std::size_t>(std::ceil(static_cast<double>(c->untraced.min_steps) * steps_scale));
    c->stop_ns = runtime::monotonic_ns() - static_cast<std::int64_t>(c->untraced.settle_ns);
    c->meter = runtime::UntracedStep(c->stop_ns, c->launches_per_step, c->untraced, !c->anchor.empty());
    c->energy_from_ns = -1;
    c->energy_from.reset();
    c->po.measured_power.reset();
    c->others_launches = 0;
    std::lock_guard<std::mutex> g(mu_);
    cand_ = std::move(c);
    return Outcome::keep_learning;
  };
  // Recording every kernel can only slow a job, so an untraced step longer than the traced one is the job's own
  // slow stretch (H200, gradient checkpointing: 172.3 ms untraced against 154.5 ms traced and the job's own
  // 155-158 ms; re-timed to it, its phases missed: 85 % in time). Measured once more; a second window as long
  // says the job did slow down, and the template is re-timed to it.
  // Above 1.5× the re-time bound only: a loaded machine moves a step by ~4.5 % between windows (a 2-core CI box).
  if (off > 1.5 * o_.max_untraced_disagreement && !c->measured_again) {
    say(o_.progress_sink, fmt::format("gearshift run --auto: {}: longer than the traced step, which recording can "
                                      "only lengthen: the job slowed for a while after recording stopped; measuring "
                                      "the untraced step again",
                                      line));
    return measure_again(1);
  }
  // An untraced step shorter than the traced kernels alone cannot be the job's (recording does not speed its
  // kernels up): the window counted steps that were not there, or missed a slow one. Measured again over twice the
  // steps before anything is refused (H100, Megatron-LM with 3 microbatches of accumulation: 944 ms measured for
  // 947 ms of kernels, where its own log said 975-1,000 ms per iteration; refused, issue 50).
  const double busy_ns = trace::template_busy_ns(c->r->iterations.tmpl);
  if (pu < busy_ns && !c->measured_again) {
    say(o_.progress_sink,
        fmt::format("gearshift run --auto: {}: shorter than the {:.2f} ms its kernels alone were busy in the traced "
                    "steps; measuring the untraced step again over {} steps",
                    line, busy_ns / 1e6, 2 * c->untraced.min_steps));
    return measure_again(2);
  }
  if (std::abs(off) <= o_.max_untraced_disagreement) {
    say(o_.progress_sink, fmt::format("gearshift run --auto: {}: the warm-up's timing holds", line));
    if (!c->po.measured_power) return apply_checked(*c->r, c->po, c->source);
    // The template keeps its traced step: calibrated to the untraced run's energy per step spread over it (a
    // power-capped job's 688 W over its 155 ms untraced step could not be reached over the 166 ms template).
    c->po.measured_power = sim::MeasuredPower{
        untraced_power->average_power_w * pu / pt,
        fmt::format("{} ({:.0f} W over the {:.2f} ms untraced step: its {:.1f} J per step over the template's {:.2f} ms)",
                    untraced_power->source, untraced_power->average_power_w, pu / 1e6,
                    untraced_power->average_power_w * pu * 1e-9, pt / 1e6),
        0};
    try {  // planned again, calibrated to the untraced run's power
      PlanJobResult r2 = plan_trace(c->po, std::move(c->r->trace), std::move(c->r->iterations));
      return apply(r2, c->po, c->source);
    } catch (const std::exception& e) {
      give_up(std::string("planning failed: ") + e.what());
      return Outcome::gave_up;
    }
  }
  try {
    trace::IterationAnalysis an = c->r->iterations;
    const double busy = busy_ns, idle = an.tmpl.period_ns - busy;
    // Measured twice and still a little short of the kernels' busy time: within the measurement's own error of
    // it, the job is taken as GPU-bound (the template's idle time removed: nothing to slow into), not refused.
    double step_ns = pu;
    if (pu < busy && pu >= busy * (1 - o_.max_untraced_disagreement)) {
      step_ns = busy;
      say(o_.progress_sink,
          fmt::format("gearshift run --auto: {}: measured twice, {:.1f} % short of the {:.2f} ms its kernels alone "
                      "were busy, within the untraced measurement's error ({:.0f} %): the job is planned as "
                      "GPU-bound, its template's idle time removed",
                      line, 100 * (1 - pu / busy), busy / 1e6, 100 * o_.max_untraced_disagreement));
      // The window's energy per step kept over the longer template.
      if (c->po.measured_power) {
        c->po.measured_power->average_power_w *= pu / busy;
        c->po.measured_power->source += fmt::format(" (its energy per step over the {:.2f} ms GPU-bound template)",
                                                    busy / 1e6);
      }
    }
    try {
      trace::rescale_idle(an.tmpl, step_ns);
    } catch (const std::invalid_argument& e) {
      give_up(fmt::format("{}: {} recorded while every kernel's activity was: the warm-up's kernel times are not "
                          "the job's, no step to plan for",
                          line, e.what()));
      return Outcome::gave_up;
    }
    const double f = idle > 0 ? (an.tmpl.period_ns - busy) / idle : 1;
    // Said before planning, so that a refused calibration still shows what it was given.
    say(o_.progress_sink,
        fmt::format(
            "gearshift run --auto: {}: the template's idle time re-timed by {:.2f} ({:.2f} of {:.2f} ms per step "
            "busy)",
            line, f, busy / 1e6, pt / 1e6));
    c->po.traced_template = c->r->iterations.tmpl;  // the in-time check replays the trace at its own timing
    PlanJobResult r2 = plan_trace(c->po, std::move(c->r->trace), std::move(an));
    const double modelled_ns = r2.evaluation.baseline.step_time_ns, off2 = modelled_ns / step_ns - 1;
    if (std::abs(off2) > runtime::kMaxLiveStepDisagreement) {
      give_up(
          fmt::format("re-timed to the untraced step, the modelled step ({:.2f} ms) is {:+.1f} % off it: no step "
                      "to plan for",
                      modelled_ns / 1e6, 100 * off2));
      return Outcome::gave_up;
    }
    say(o_.progress_sink,
        fmt::format("gearshift run --auto: re-timed template: modelled step {:.2f} ms", modelled_ns / 1e6));
    return apply(r2, c->po, c->source);
  } catch (const std::exception& e) {
    give_up(std::string("planning failed: ") + e.what());
    return Outcome::gave_up;
  }
}

AutoPlanner::Outcome AutoPlanner::apply_checked(PlanJobResult& r, const PlanJobOptions& po, std::uint32_t source) {
  if (!po.check_in_time || r.in_time.checked || !r.in_time.skipped.empty()) return apply(r, po, source);
  try {
    PlanJobResult r2 = plan_trace(po, std::move(r.trace), std::move(r.iterations));
    return apply(r2, po, source);
  } catch (const std::exception& e) {
    give_up(std::string("planning failed: ") + e.what());
    return Outcome::gave_up;
  }
}

AutoPlanner::Outcome AutoPlanner::apply(const PlanJobResult& r, const PlanJobOptions& po, std::uint32_t source) {
  if (!r.calibrated_to_w && !po.model) {  // right or refused: the priors' power is no evidence of a saving
    give_up(fmt::format("no measured power to calibrate the model to ({}): the class priors' power alone modelled "
                        "3-4x the saving of the same job calibrated (H200); no plan. A model file from `gearshift "
                        "calibrate` (--model FILE) plans without it",
                        o_.energy ? "the GPU's NVML energy counter gave no reading over a window of at least 0.9 s"
                                  : "no energy counter was read"));
    return Outcome::gave_up;
  }
  try {
    const plan::PlanFile f = plan_file(po, r);
    // The runtime follows the same plan.json that `gearshift plan -o` would have written, validated as it would be
    // when read.
    plan::validate(f, "the --auto plan");
    runtime::ClockPlan cp = runtime::clock_plan_from(f);
    const auto& s = *r.chosen;
    const sim::StrategyResult* one_pair = one_pair_plan(r);
    // A plan of one pair has no change to land late: no guard (its fallback would be the same pair or a costlier one).
    const bool single_pair = cp.kernels_only().one_pair().has_value();
    if (!single_pair) cp.in_time_fallback = one_pair ? one_pair->schedule.clocks.front() : cp.default_clocks;
    say(o_.progress_sink,
        fmt::format("gearshift run --auto: plan for {} ({}), {} strategy, L = {:g} ms, budget {:.2f} %: {}",
                    r.model->spec().name, r.model->spec().full_name, plan::to_string(s.schedule.strategy),
                    r.in_time.switch_latency_ns > 0 ? r.in_time.switch_latency_ns / 1e6 : s.switch_latency_ns / 1e6,
                    po.max_slowdown * 100,
                    s.within_budget ? fmt::format("{} phases, {} clock changes per step; MODELLED saving {:.2f} % "
                                                  "energy per step at {:.2f} % step time{}",
                                                  plan::phases_of(s.schedule).size(), s.sim.clock_changes, s.saving_pct,
                                                  s.slowdown_pct, over_budget_note(r.range))
                                    : std::string("no plan fits the budget: default clocks, no changes")));
    if (const std::string c = cpu_wait_caution(r.workload, syncs_per_step_); !c.empty() && s.within_budget)
      say(o_.progress_sink, c);
    const std::string clocks =
        !clocks_ ? std::string()
                 : fmt::format("; SM clock sampled (NVML, every {} ms) on {} of the template's {} kernels{}",
                               WarmupClocks::kPeriodNs / 1'000'000, clock_sampled_kernels_, template_kernels_,
                               r.gemm_clock_source.empty() ? std::string()
                                                           : ", dense GEMMs capped at " + r.gemm_clock_source);
    say(o_.progress_sink,
        fmt::format("gearshift run --auto: model {}{}",
                    r.calibrated_to_w ? fmt::format("calibrated to the measured {:.0f} W, from {}", *r.calibrated_to_w,
                                                    r.calibration_source)
                                      : fmt::format("from {}", r.calibration_source),  // --model (else refused above)
                    clocks));
    if (!r.activity_reading_note.empty())
      say(o_.progress_sink, "gearshift run --auto: model: " + r.activity_reading_note);
    if (!o_.plan_output.empty()) {
      try {
        plan::write_plan_file(f, o_.plan_output);
        say(o_.progress_sink, fmt::format("gearshift run --auto: plan written to {}", o_.plan_output));
      } catch (const plan::PlanFileError& e) {
        say(o_.progress_sink,
            fmt::format("gearshift run --auto: warning: {}; the plan is applied all the same", e.what()));
      }
    }
    say(o_.progress_sink, "gearshift run --auto: " + r.in_time.summary());
    say(o_.progress_sink, single_pair ? std::string("gearshift run --auto: in-time guard: none: the plan is one clock "
                                                    "pair for the whole step (no change inside it to land late); GPU "
                                                    "progress is followed only until the pair is set, no kernel "
                                                    "activity is sampled")
                                      : in_time_guard_line(one_pair, *cp.in_time_fallback));
    say(o_.progress_sink, "gearshift run --auto: applying the plan from now on");
    start_(cp, source);
  } catch (const std::exception& e) {  // Exit, PlanError, allocation: the job must run on regardless
    give_up(std::string("planning failed: ") + e.what());
    return Outcome::gave_up;
  }
  if (clocks_) clocks_->stop();
  std::lock_guard<std::mutex> g(mu_);
  state_ = State::planned;
  sources_.clear();
  return Outcome::planned;
}

std::string AutoPlanner::finish() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (clocks_) clocks_->stop();
  std::vector<std::pair<std::uint32_t, trace::Trace>> changed;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (state_ == State::planned) return {};
    if (state_ == State::gave_up) return reason_;
    if (state_ == State::measuring)
      return fmt::format("the job ended while its untraced step was measured ({} launches counted, {:.1f} s into "
                         "the warm-up); no plan was made and the clocks were left alone",
                         cand_ ? cand_->meter.counted() : 0, seconds_since(t0_));
    for (auto& [id, src] : sources_) {
      src.last.launches = src.collector.launches();
      src.last.unmatched = src.collector.unmatched();
      if (src.collector.ops() != src.last.kernels + src.last.copies) changed.emplace_back(id, src.collector.snapshot());
    }
  }
  // Still warming up when the job ended: one last look at what came, for the report.
  for (auto& [id, t] : changed) {
    runtime::FeedCollector::sort_by_start(t);
    Attempt a = detect(t);
    std::lock_guard<std::mutex> g(mu_);
    Attempt& last = sources_.at(id).last;
    a.launches = last.launches;
    a.unmatched = last.unmatched;
    last = a;
  }
  Attempt b;
  std::size_t processes = 0;
  std::string failed;
  {
    std::lock_guard<std::mutex> g(mu_);
    b = best();
    processes = sources_.size();
    failed = check_failed_;
  }
  return fmt::format("the job ended during the warm-up ({:.1f} s): {}{}{}; no plan was made and the clocks were left "
                     "alone",
                     seconds_since(t0_), progress(b),
                     processes > 1 ? fmt::format(" (the best of {} processes on the run's GPU)", processes) : "",
                     failed.empty() ? "" : "; last step found: " + failed);
}

}  // namespace gearshift::service
