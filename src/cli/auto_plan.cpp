#include "cli/auto_plan.hpp"

#include <algorithm>
#include <utility>

#include <fmt/core.h>

#include "cli/commands.hpp"
#include "cli/plan_job.hpp"
#include "plan/plan_file.hpp"
#include "runtime/step_check.hpp"
#include "trace/iteration.hpp"

namespace gearshift::cli {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

AutoPlanner::AutoPlanner(AutoOptions options, StartLive start)
    : o_(std::move(options)),
      start_(std::move(start)),
      t0_(std::chrono::steady_clock::now()),
      collector_(o_.max_kernels) {
  thread_ = std::thread([this] { loop(); });
}

AutoPlanner::~AutoPlanner() { finish(); }

void AutoPlanner::add(const runtime::FeedEvent& e) {
  std::lock_guard<std::mutex> g(mu_);
  if (state_ == State::collecting) collector_.add(e);
}

AutoPlanner::Attempt AutoPlanner::detect(const trace::Trace& t, std::optional<trace::IterationAnalysis>* an) const {
  Attempt a;
  a.kernels = t.ops.size();
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

std::string AutoPlanner::collected(const Attempt& a) {
  std::string s = fmt::format("{} kernels collected", a.kernels);
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
  std::string s = fmt::format("{}, {} steps detected, {} needed (--warmup-steps)", collected(a),
                              a.steps, o_.warmup_steps);
  if (a.steps == 0 && !a.why.empty()) s += ": " + a.why;
  return s;
}

void AutoPlanner::loop() {
  auto next = t0_ + o_.attempt_period;
  for (;;) {
    trace::Trace t;
    std::vector<std::int64_t> syncs;
    std::uint64_t launches = 0, unmatched = 0;
    bool full = false, timed_out = false;
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait_until(g, next, [&] { return stopping_; });
      if (stopping_) return;
      full = collector_.full();
      timed_out = seconds_since(t0_) >= o_.timeout_s;
      if (collector_.kernels() == last_.kernels && !timed_out) {
        next = std::chrono::steady_clock::now() + o_.attempt_period;
        continue;
      }
      if (collector_.kernels() != last_.kernels) {
        t = collector_.snapshot();
        syncs = collector_.sync_exits();
      }
      launches = collector_.launches();
      unmatched = collector_.unmatched();
    }
    const auto began = std::chrono::steady_clock::now();
    runtime::FeedCollector::sort_by_start(t);  // outside the lock: the feed reader keeps adding meanwhile
    std::optional<trace::IterationAnalysis> an;  // kept for planning: detection is the costly part
    Attempt a = t.ops.empty() ? last_ : detect(t, &an);
    a.launches = launches;
    a.unmatched = unmatched;
    {
      std::lock_guard<std::mutex> g(mu_);
      last_ = a;
    }
    if (a.steps >= o_.warmup_steps) {
      const Outcome out = plan(std::move(t), std::move(an), a, std::move(syncs), seconds_since(t0_));
      if (out != Outcome::keep_learning) return;
      if (full || timed_out) {
        give_up(fmt::format("gave up after {}: {}",
                            full ? fmt::format("{} kernels", o_.max_kernels)
                                 : fmt::format("{:g} s of warm-up (--warmup-timeout)", o_.timeout_s),
                            check_failed_));
        return;
      }
    } else if (full || timed_out) {
      std::string why = full ? fmt::format("gave up after {} kernels without enough steps", o_.max_kernels)
                             : fmt::format("gave up after {:g} s of warm-up (--warmup-timeout)", o_.timeout_s);
      give_up(why + ": " + progress(a));
      return;
    }
    // Detection costs more as the trace grows: at least twice its last run time between attempts.
    next = std::chrono::steady_clock::now() + std::max<std::chrono::steady_clock::duration>(
                                                  o_.attempt_period, 2 * (std::chrono::steady_clock::now() - began));
  }
}

void AutoPlanner::give_up(const std::string& why) {
  std::lock_guard<std::mutex> g(mu_);
  state_ = State::gave_up;
  reason_ = why + "; the job ran on with its clocks untouched";
  collector_ = runtime::FeedCollector(0);  // frees the records
  fmt::print(stderr, "gearshift run --auto: {}; continuing as a pass-through\n", why);
}

AutoPlanner::Outcome AutoPlanner::plan(trace::Trace t, std::optional<trace::IterationAnalysis> an, const Attempt& a,
                                       std::vector<std::int64_t> syncs, double seconds) {
  PlanJobOptions po;
  po.display_name = o_.job_name;
  po.gpu = o_.gpu_spec;
  po.max_slowdown = o_.max_slowdown;
  po.strategy = "phase";
  po.switch_latency_ms = o_.switch_latency_ms;
  try {
    PlanJobResult r = plan_trace(po, std::move(t), std::move(an));
    const auto& it = r.iterations;
    // The live check before anything is applied or reported: a step that fails it gets no plan and no saving.
    const runtime::LiveStepCheck check = runtime::check_live_step(it, r.evaluation.baseline.step_time_s, std::move(syncs));
    const std::string found = fmt::format("{} steps detected by {} ({} kernels, {:.2f} ms per step, confidence {:.2f})",
                                          it.iterations.size(), it.method, it.tmpl.kernels, it.tmpl.period_ns / 1e6,
                                          it.confidence);
    if (!check.passed) {
      std::string line = fmt::format("{}: the live check failed: {} ({})", found, check.why, check.evidence);
      // Said the first time, then at most every kCheckNoteEvery (each attempt on a longer warm-up says the same).
      if (check_failed_.empty() || seconds >= last_check_note_s_ + kCheckNoteEvery.count()) {
        fmt::print(stderr, "gearshift run --auto: warm-up {:.1f} s, {}, {}; learning on\n", seconds, collected(a),
                   line);
        last_check_note_s_ = seconds;
      }
      std::lock_guard<std::mutex> g(mu_);
      check_failed_ = std::move(line);
      return Outcome::keep_learning;
    }
    const plan::PlanFile f = plan_file(po, r);
    // The runtime follows the same plan.json that `gearshift plan -o` would have written, validated as it would be
    // when read.
    plan::validate(f, "the --auto plan");
    runtime::ClockPlan cp = runtime::clock_plan_from(f);
    const auto& s = *r.chosen;
    fmt::print(stderr, "gearshift run --auto: warm-up {:.1f} s, {}, {}\n", seconds, collected(a), found);
    fmt::print(stderr, "gearshift run --auto: live check passed: {}\n", check.evidence);
    fmt::print(stderr, "gearshift run --auto: plan for {} ({}), phase strategy, L = {:g} ms, budget {:.2f} %: ",
               r.model->spec().name, r.model->spec().full_name, s.switch_latency_ns / 1e6, po.max_slowdown * 100);
    if (s.within_budget)
      fmt::print(stderr,
                 "{} phases, {} clock changes per step; MODELLED saving {:.2f} % energy per step at {:.2f} % step "
                 "time\n",
                 plan::phases_of(s.schedule).size(), s.sim.clock_changes, s.saving_pct, s.slowdown_pct);
    else
      fmt::print(stderr, "no plan fits the budget: default clocks, no changes\n");
    if (!o_.plan_output.empty()) {
      try {
        plan::write_plan_file(f, o_.plan_output);
        fmt::print(stderr, "gearshift run --auto: plan written to {}\n", o_.plan_output);
      } catch (const plan::PlanFileError& e) {
        fmt::print(stderr, "gearshift run --auto: warning: {}; the plan is applied all the same\n", e.what());
      }
    }
    fmt::print(stderr, "gearshift run --auto: applying the plan from now on\n");
    start_(cp);
  } catch (const std::exception& e) {  // Exit, PlanError, allocation: the job must run on regardless
    give_up(std::string("planning failed: ") + e.what());
    return Outcome::gave_up;
  }
  std::lock_guard<std::mutex> g(mu_);
  state_ = State::planned;
  collector_ = runtime::FeedCollector(0);
  return Outcome::planned;
}

std::string AutoPlanner::finish() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  trace::Trace t;
  Attempt last;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (state_ == State::planned) return {};
    if (state_ == State::gave_up) return reason_;
    last = last_;
    if (collector_.kernels() != last_.kernels) t = collector_.snapshot();
    last.launches = collector_.launches();
    last.unmatched = collector_.unmatched();
  }
  runtime::FeedCollector::sort_by_start(t);
  // Still warming up when the job ended: one last look at what came, for the report.
  Attempt a = t.ops.empty() ? last : detect(t);
  a.launches = last.launches;
  a.unmatched = last.unmatched;
  std::string failed;
  {
    std::lock_guard<std::mutex> g(mu_);
    failed = check_failed_;
  }
  return fmt::format("the job ended during the warm-up ({:.1f} s): {}{}; no plan was made and the clocks were left "
                     "alone",
                     seconds_since(t0_), progress(a), failed.empty() ? "" : "; last step found: " + failed);
}

}  // namespace gearshift::cli
