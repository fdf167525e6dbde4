// run --auto's untraced step (AutoPlanner's state `measuring`): recording stops, the step is measured from the
// launch rate (runtime/untraced_step.hpp) and the energy counter, and the plan is kept, re-timed, measured again
// or refused from what it says (docs/runtime.md, "The untraced step").
#include <cmath>
#include <fstream>
#include <utility>

#include <fmt/core.h>

#include "service/auto_plan.hpp"
#include "service/auto_plan_candidate.hpp"
#include "runtime/live.hpp"
#include "runtime/step_check.hpp"
#include "trace/idle_rescale.hpp"
#include "trace/iteration.hpp"

namespace gearshift::service {

namespace {

// A kernel's name for one line of output: its first 60 characters (templated names run to thousands).
std::string short_kernel_name(const std::string& name) {
  return name.size() <= 60 ? name : name.substr(0, 57) + "...";
}

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

}  // namespace

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

}  // namespace gearshift::service
