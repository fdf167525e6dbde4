#include "service/auto_plan.hpp"
#include "service/auto_plan_candidate.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/core.h>

#include "graph/step_graph.hpp"
#include "service/plan_job.hpp"
#include "plan/plan_file.hpp"
#include "runtime/live.hpp"
#include "runtime/step_check.hpp"
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


double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
std::int64_t ns_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t).count();
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
    if (s.within_budget)  // what the MODELLED saving rests on (sim/saving_parts.hpp; the untraced step backs the waits)
      say(o_.progress_sink, fmt::format("gearshift run --auto: the saving rests on: {} (% of the baseline energy, "
                                        "MODELLED)", r.saving_parts.line()));
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
