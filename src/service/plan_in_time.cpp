#include "service/plan_in_time.hpp"

#include <cmath>
#include <exception>

#include <fmt/format.h>

#include "runtime/gpu_progress.hpp"
#include "runtime/replay.hpp"
#include "runtime/runtime_core.hpp"
#include "service/live_plan.hpp"

namespace gearshift::service {

std::string InTimeRung::label() const {
  if (std::isinf(min_phase_ns)) return "one clock pair for the whole step";
  if (min_phase_ns > 0) return fmt::format("phases of at least {:g} ms", min_phase_ns / 1e6);
  return plan ? fmt::format("the phase plan at L = {:g} ms", plan->switch_latency_ns / 1e6) : "the plan";
}

std::string InTimeCheck::summary() const {
  if (!checked) return "in-time check skipped: " + skipped;
  const InTimeRung& t = *taken();
  auto figure = [](const InTimeRung& r) {
    return r.in_time ? fmt::format("{:.1f} % in time", 100 * *r.in_time) : std::string("not replayed: no change inside the step");
  };
  std::string line = fmt::format("in-time check (replay of the trace's first {} steps{}, L = {:g} ms, target {:.0f} %): ",
                                 steps_replayed, anchors.empty() ? "" : ", anchored on " + anchors,
                                 switch_latency_ns / 1e6, 100 * target);
  for (std::size_t i = 0; i + 1 < rungs.size(); ++i)
    line += fmt::format("{} {} ({} changes per step); ", rungs[i].label(), figure(rungs[i]), rungs[i].plan->sim.clock_changes);
  line += fmt::format("{}: {} ({} changes per step, MODELLED saving {:.2f} %)", coarsened() ? "taken " + t.label() : t.label(),
                      figure(t), t.plan->sim.clock_changes, t.plan->saving_pct);
  if (!t.boundary_errors.empty()) line += "; " + t.boundary_errors;
  return line;
}

InTimeCheck check_in_time(const trace::Trace& trace, const trace::IterationAnalysis& analysis,
                          const std::vector<InTimeRung>& ladder,
                          const std::function<runtime::ClockPlan(const sim::StrategyResult&)>& clock_plan_of,
                          double switch_latency_ns, double target, std::size_t max_steps) {
  InTimeCheck c;
  c.target = target;
  c.switch_latency_ns = switch_latency_ns;
  if (ladder.empty()) {
    c.skipped = "no plan to check";
    return c;
  }
  if (analysis.iterations.size() < 2) {
    c.skipped = "fewer than two steps to replay";
    return c;
  }
  // As `gearshift run` follows a plan by default: GPU progress from the job's synchronizes (the trace's own where
  // it recorded them, else one assumed at each step's end) and stream markers; the changes issued L ahead.
  runtime::ReplayOptions ro;
  ro.min_plan_match = 0;  // the plan was made from this trace
  Switching sw{switch_latency_ns, std::nullopt};
  ro.scheduler = scheduler_options(runtime::ClockPlan{}, sw);  // L, and L between changes, as `run` takes them
  ro.sync_progress = true;
  ro.marker_period_ns = static_cast<double>(runtime::kMarkerPeriodNs);
  ro.max_steps = max_steps + 1;  // the first step only locks the predictor
  runtime::StepAlignments alignments;  // every rung's plan has the same positions: the steps align once
  ro.alignments = &alignments;
  c.steps_replayed = std::min(analysis.iterations.size(), ro.max_steps) - 1;
  for (std::size_t i = 0; i < ladder.size(); ++i) {
    InTimeRung rung = ladder[i];
    const bool last = i + 1 == ladder.size();
    if (last && rung.plan->sim.clock_changes == 0) {  // nothing to time: taken as it is
      c.rungs.push_back(std::move(rung));
      break;
    }
    try {
      const runtime::ReplayResult r = runtime::replay(trace, analysis, clock_plan_of(*rung.plan), ro);
      if (r.scored_launches == 0) {
        c.rungs.clear();
        c.skipped = "no launch after the first step to replay";
        return c;
      }
      rung.in_time = r.in_time_fraction;
      c.anchors = r.sync_source == runtime::SyncSource::trace
                      ? fmt::format("the job's {} synchronizes", r.syncs_used)
                      : std::string("one synchronize assumed at each step's end");
      rung.boundary_errors = runtime::describe_boundary_errors(r.boundary_error_ns);
    } catch (const std::exception& e) {
      c.rungs.clear();
      c.skipped = std::string("the replay failed: ") + e.what();
      return c;
    }
    const bool met = *rung.in_time >= target;
    c.rungs.push_back(std::move(rung));
    if (met) break;
  }
  c.checked = true;
  return c;
}

}  // namespace gearshift::service
