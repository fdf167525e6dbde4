#include "cli/plan_print.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpu/spec.hpp"

namespace gearshift::cli {

using service::PlanJobOptions;
using service::PlanJobResult;

namespace {

std::string latency_label(const sim::StrategyResult& s) {
  if (s.schedule.strategy != plan::Strategy::phase) return "ideal";
  double us = s.switch_latency_ns / 1e3;
  if (us == 0) return "0";
  if (us < 1000) return fmt::format("{:g} µs", us);
  return fmt::format("{:g} ms", us / 1000);
}

// A plain-words headline for the warnings a newcomer meets on every H200 trace (issue 51: "the other reading of
// power the model cannot place" could not be placed); the expert detail follows it, as in --json and the report.
std::string headline(const std::string& w) {
  if (w.starts_with("memory clock kept at its default"))
    return "only the SM clock is planned (how much power the memory draws is not known here; nothing to do, or "
           "measure it with `gearshift calibrate`): ";
  if (w.find("read instead as SM activity") != std::string::npos)
    return "the saving depends on where part of the measured power is placed (the other reading's figure is here): ";
  return "";
}

// What the plan's saving rests on (sim/saving_parts.hpp); where the step is replayed GPU-bound, how much of the
// saving it would have if the job is as launch-bound as traced rests on the launch-bound waits.
std::string rests_on(const service::PlanJobResult& r) {
  const sim::SavingParts& p = r.saving_parts;
  std::string s = fmt::format("the plan's {:.2f} %: {} (% of the baseline energy, MODELLED; docs/simulator.md){}",
                              p.pct(p.saving_j), p.line(),
                              p.dependency_replay ? "" : "; no launch events: no slowing is replayed into a wait");
  if (r.cpu.if_launch_bound_parts) {
    const sim::SavingParts& q = *r.cpu.if_launch_bound_parts;
    s += fmt::format("; as launch-bound as traced it would save {:.2f} %, {:.2f} % of it in waits not measured",
                     q.pct(q.saving_j), q.pct(q.waits_total_j()));
  }
  return s;
}

}  // namespace

void print_report(const PlanJobOptions& o, const PlanJobResult& r) {
  const auto& spec = r.model->spec();
  const auto& it = r.iterations;
  fmt::print("gearshift plan: {} on {} ({})\n", o.display_name, spec.full_name, spec.name);
  fmt::print("All time and energy figures are MODELLED (DVFS model + simulator) unless marked measured.\n");
  // The one answer first (issue 51: a newcomer found it on line ~30, after two warnings): the plan, its saving and
  // step time with their ranges, and the chance it breaks the budget; the detail follows.
  const auto& c = *r.chosen;
  const auto& g = r.range;
  if (c.within_budget)
    fmt::print("Answer        {} plan at L = {} ({} clock changes per step): saving {:.2f} % of the energy per step "
               "({:.2f} to {:.2f} %) at {:+.2f} % step time; P(step time over the {:.2f} % budget) = {:.0f} %. "
               "MODELLED: `gearshift run` measures it on the job (docs/verification.md)\n",
               plan::to_string(c.schedule.strategy), latency_label(c), c.sim.clock_changes, g.saving_expected_pct,
               g.saving_low_pct, g.saving_high_pct, c.slowdown_pct, o.max_slowdown * 100, 100 * g.p_over_budget);
  else
    fmt::print("Answer        no {} plan fits the {:.2f} % budget: the default clocks (a larger --max-slowdown, "
               "or the frontier below, shows what one would save)\n",
               plan::to_string(c.schedule.strategy), o.max_slowdown * 100);
  fmt::print("Terms         docs/glossary.md (SM clock, switch latency L, phase, strategies, in time, ...)\n\n");
  fmt::print("GPU           {}\n", r.gpu.line());
  fmt::print("Iterations    {} detected by {}; {} kernels ({} ops) per step; period {:.2f} ms; confidence {:.3f}\n",
             it.iterations.size(), it.method, it.tmpl.kernels, it.tmpl.ops.size(), it.tmpl.period_ns / 1e6,
             it.confidence);
  if (o.kernels_only)
    fmt::print("Input         the trace's kernels only (--kernels-only): {} copies and memsets left out, as `run --auto` "
               "sees a job whose CUPTI refuses copy activity\n",
               r.left_out_ops);
  for (const auto& e : it.evidence.lines) fmt::print("Evidence      {}\n", e);
  fmt::print("Replay        {}\n", graph::build_step_graph(r.workload).note);
  if (!r.cpu.as_traced) fmt::print("CPU side      {}\n", r.cpu.line());
  if (r.cpu.profiler) fmt::print("Profiler      {}\n", r.cpu.profiler->line(r.cpu.traced_step_ns, r.cpu.replayed_step_ns));
  const auto& b = r.evaluation.baseline;
  fmt::print("Baseline      default clocks (SM {} MHz, memory {} MHz, {:.0f} W cap): modelled {:.4f} s, {:.2f} J, {:.0f} W per step\n",
             spec.default_sm_clock_mhz, spec.default_mem_clock_mhz, r.model->params().power_cap_w,
             b.step_time_ns * 1e-9, b.energy_j, b.average_power_w);
  const auto& ms = r.trace.measured;
  if (ms.energy_per_step_j || ms.step_time_s)
    fmt::print("Measured      {}{} per step (from the trace's meta: NVML energy counter, untraced run)\n",
               ms.step_time_s ? fmt::format("{:.4f} s, ", *ms.step_time_s) : std::string(),
               ms.energy_per_step_j ? fmt::format("{:.2f} J", *ms.energy_per_step_j) : std::string("? J"));
  if (r.calibrated_to_w)
    fmt::print("Model         class priors; memory/uncore power {:.0f} W at max memory clock, activity scale {:.3f}:\n"
               "              calibrated to the measured {:.0f} W, from {}; dense GEMMs capped at {} MHz{}\n",
               r.model->params().memory_w_at_max, r.model->params().activity_scale, *r.calibrated_to_w,
               r.calibration_source,
               r.model->capped_sm_clock({r.model->spec().default_sm_clock_mhz, r.model->spec().default_mem_clock_mhz},
                                        model::class_prior(model::KernelClass::gemm)),
               r.gemm_clock_source.empty() ? "" : " (sag from " + r.gemm_clock_source + ")");
  else
    fmt::print("Model         class priors; activity scale 1 ({})\n",
               r.calibration_source.empty() ? "no measured power in the trace: uncalibrated" : r.calibration_source);
  fmt::print("Budget        step time <= baseline + {:.2f} %\n\n", o.max_slowdown * 100);
  fmt::print("{:<14} {:>9} {:>10} {:>11} {:>8} {:>9} {:>13}\n", "strategy", "switch L", "time (s)", "energy (J)",
             "saving", "slowdown", "changes/step");
  for (const auto& s : r.evaluation.strategies) {
    fmt::print("{:<14} {:>9} {:>10.4f} {:>11.2f} {:>7.2f}% {:>8.3f}% {:>13}{}{}\n", plan::to_string(s.schedule.strategy),
               latency_label(s), s.sim.step_time_ns * 1e-9, s.sim.energy_j, s.saving_pct, s.slowdown_pct,
               s.sim.clock_changes, s.within_budget ? "" : "  (no plan fits: default clocks)",
               &s == r.chosen ? "  <- the plan" : "");
  }
  const std::string outside = sim::expected_outside_range(g);
  fmt::print("\nRange         {} at L = {}: saving {:.2f} % expected, {:.2f} to {:.2f} %; step time {:.4f} s, {:.4f} to "
             "{:.4f} s;\n              P(step time over the budget) = {:.0f} % ({:.0f}th to {:.0f}th percentile of {} draws of "
             "the class priors' measured spread, docs/model-validation.md{})\n",
             plan::to_string(r.chosen->schedule.strategy), latency_label(*r.chosen), g.saving_expected_pct, g.saving_low_pct,
             g.saving_high_pct, g.time_expected_ns * 1e-9, g.time_low_ns * 1e-9, g.time_high_ns * 1e-9,
             100 * g.p_over_budget, 100 * g.low_quantile, 100 * g.high_quantile, g.samples,
             std::string(g.level_normalised ? "" : "; no measured power: the draws are not held to one") +
                 (g.other_reading_saving_pct
                      ? fmt::format("; the saving's range holds the other reading's {:.2f} %", *g.other_reading_saving_pct)
                      : std::string()) +
                 (outside.empty() ? std::string() : "; " + outside));
  fmt::print("Rests on      {}\n", rests_on(r));
  fmt::print("In time       {}\n", r.in_time.summary());
  // After the table: what was dropped, left out or disagrees with a measurement (the detail in --json and the report).
  for (const auto& w : r.warnings) fmt::print("Warning       {}{}\n", headline(w), w);
  fmt::print("\n'ideal': switching is free and instant; 'phase' issues each change L before its phase and keeps every\n"
             "phase at least L long (a change issued less than L after the previous one lands late: old clocks hold).\n");
  if (!r.evaluation.frontier.empty()) {
    const auto& mem = spec.mem_clocks_mhz;
    fmt::print("\nFrontier      modelled saving per slowdown budget; phase at L = {}; SM clock and {}\n",
               latency_label(r.evaluation.frontier.front().strategies.back()),
               mem.size() > 1 ? fmt::format("memory clock ({} MHz) as knobs", fmt::join(mem, ", "))
                              : fmt::format("memory clock fixed at {} MHz (the only one planned)", mem.front()));
    fmt::print("{:<9}", "budget");
    for (const auto& s : r.evaluation.frontier.front().strategies)
      fmt::print(" {:>14}", s.schedule.strategy == plan::Strategy::phase ? "phase " + latency_label(s)
                                                                           : std::string(plan::to_string(s.schedule.strategy)));
    fmt::print("\n");
    for (const auto& p : r.evaluation.frontier) {
      fmt::print("{:>7.1f} %", p.max_slowdown * 100);
      for (const auto& s : p.strategies)
        fmt::print(" {:>14}", s.within_budget ? fmt::format("{:.2f} %", s.saving_pct) : std::string("none fits"));
      fmt::print("\n");
    }
  }
}

}  // namespace gearshift::cli
