#include "service/plan_job.hpp"

#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "service/error.hpp"
#include "gearshift/version.hpp"
#include "gpu/spec.hpp"
#include "graph/step_graph.hpp"
#include "runtime/clock_plan.hpp"
#include "sim/measurement.hpp"
#include "trace/idle_rescale.hpp"
#include "trace/error.hpp"
#include "trace/gearshift_format.hpp"

namespace gearshift::service {

using Kind = ServiceError::Kind;

sim::CalibratedModel load_model_checked(const std::string& path) {
  sim::CalibratedModel m;
  try {
    m = sim::load_model_file(path);
  } catch (const std::runtime_error& e) {
    throw ServiceError(Kind::kBadInput, e.what());
  }
  gpu::GpuSpec spec;
  try {
    spec = gpu::find_spec(m.gpu);
  } catch (const std::invalid_argument& e) {
    throw ServiceError(Kind::kBadInput, fmt::format("{}: \"gpu\": {}", path, e.what()));
  }
  if (auto why = sim::implausible_model(m, spec); !why.empty())
    throw ServiceError(Kind::kModelRefused, fmt::format("{}: model refused: {}", path, fmt::join(why, "; ")));
  return m;
}

namespace {

// One line on a job's step variants for the plan's warnings: how many blocks, their ops, in how many steps.
std::string describe_variants(const std::vector<trace::StepVariant>& vs, const trace::IterationAnalysis& a) {
  std::size_t inserted = 0, skipped = 0, most = 0;
  for (const auto& v : vs) inserted += v.ops.size(), skipped += v.skip, most = std::max(most, v.steps);
  return fmt::format("the steps come in variants: {} block(s) that some steps run and others do not ({} ops "
                     "inserted, {} of the template's {} ops left out; the commonest in {} of {} steps). The modelled "
                     "step is the template's as it is (an inserted block is not modelled, a block it holds is "
                     "modelled in every step); the runtime follows both, an inserted op at the clocks of the op "
                     "before it",
                     vs.size(), inserted, skipped, a.tmpl.ops.size(), most, a.iterations.size());
}

// The plan.json of `s` (plan_file's, for any of the evaluation's plans).
plan::PlanFile plan_file_for(const PlanJobOptions& o, const PlanJobResult& r, const sim::StrategyResult& s);
// Runs the in-time check on r's trace and takes its plan into r.chosen (service/plan_in_time.hpp).
void check_plan_in_time(const PlanJobOptions& o, PlanJobResult& r, double switch_latency_ns);
// The calibration's memory reading is impossible (`why`): where the surplus above `memory_bound_w`, read as SM
// activity, reproduces `measured_w` with the non-GEMM kernels' activity within the class priors' measured spread,
// r's workload and model become that reading's and `why` is cleared; else `why` says why not.
void plan_in_activity_reading(PlanJobResult& r, double measured_w, double memory_bound_w,
                              std::vector<std::string>& why);
// Where the calibration put more in memory/uncore power than memory can draw, simulates the chosen plan with
// that surplus read as SM activity (sim/power_attribution.hpp): a warning with its figures, or kModelRefused
// when there the plan costs energy or breaks the budget (sim::refusal_in_reading).
void check_the_other_reading(const PlanJobOptions& o, PlanJobResult& r, double measured_w);

}  // namespace

PlanJobResult run_plan_job(const PlanJobOptions& o) {
  if (o.gpu) spec_or_exit(*o.gpu);  // a bad --gpu is reported before a long import
  trace::Trace t;
  try {
    t = trace::import_trace(o.trace_path);
  } catch (const trace::TraceError& e) {
    throw ServiceError(Kind::kBadInput, std::string(e.what()));
  }
  std::size_t left_out = 0;
  if (o.kernels_only) {
    const std::size_t before = t.ops.size();
    std::erase_if(t.ops, [](const trace::OpRecord& r) { return r.kind != trace::OpKind::kernel; });
    left_out = before - t.ops.size();
  }
  PlanJobResult r = plan_trace(o, std::move(t));
  r.left_out_ops = left_out;
  return r;
}

PlanJobResult plan_trace(const PlanJobOptions& o, trace::Trace trace,
                         std::optional<trace::IterationAnalysis> iterations) {
  PlanJobResult r;
  r.gpu = choose_gpu(o.gpu, trace, o.display_name);
  if (!r.gpu.warning.empty()) r.warnings.push_back(r.gpu.warning);
  const gpu::GpuSpec spec = gpu::find_spec(r.gpu.spec);
  r.trace = std::move(trace);
  try {
    r.iterations = iterations ? std::move(*iterations) : trace::detect_iterations(r.trace, o.steps);
  } catch (const trace::NoIterationError& e) {
    // What the timing rules dropped or flagged often explains the refusal (half the events at ts 0).
    std::string notes;
    for (const auto& w : r.trace.health.warnings) notes += (notes.empty() ? " (before detection: " : "; ") + w;
    throw ServiceError(Kind::kNoIteration, fmt::format("{}: {}{}", o.display_name, e.what(), notes.empty() ? "" : notes + ")"));
  }
  for (const auto& w : r.trace.health.warnings) r.warnings.push_back(w);
  for (const auto& w : r.iterations.evidence.warnings) r.warnings.push_back(w);
  r.variants = trace::step_variants(r.trace, r.iterations);
  if (!r.variants.empty()) r.warnings.push_back(describe_variants(r.variants, r.iterations));
  r.model.emplace(spec);
  r.workload = model::build_workload(r.trace, r.iterations, *r.model);
  // Where the trace sampled the clocks its GEMMs held, their sag at the power cap is this job's measurement,
  // not the spec's (sim/measurement.hpp): the model's power is set so that GEMMs cap there.
  if (auto f = sim::sampled_gemm_clock_mhz(r.workload); f && *f != spec.observed_capped_sm_clock_mhz) {
    gpu::GpuSpec sampled = spec;
    sampled.observed_capped_sm_clock_mhz = *f;
    r.model.emplace(sampled);
    r.workload = model::build_workload(r.trace, r.iterations, *r.model);
    r.gemm_clock_source = fmt::format("{} MHz, the median SM clock the trace sampled on its GEMMs", *f);
  }
  // A profiled step far longer than the trace's measured untraced step (issue 46): the profiler slowed the CPU side,
  // and the GPU's waits for launches under it need not exist without it. Where the step replayed GPU-bound fits in
  // the measured step, the CPU side explains the difference and is scaled to it below (decide_cpu_side). Where even
  // that replay is longer, as `run --auto` does, the template's idle time is re-timed to the measured step when its
  // kernels fit in it (trace/idle_rescale.hpp), so that no saving rests on the profiler's delays; where the kernels
  // alone outlast it, the calibration's step check refuses below.
  std::optional<PlanJobOptions> retimed_o;
  if (o.calibrate && !o.model && !o.traced_template && r.trace.measured.step_time_s &&
      *r.trace.measured.step_time_s > 0) {
    const double untraced = *r.trace.measured.step_time_s * 1e9, traced = r.iterations.tmpl.period_ns;
    const double busy = trace::template_busy_ns(r.iterations.tmpl);
    double gpu_bound = traced;
    if (graph::build_step_graph(r.workload).dependency) {
      model::Workload probe = r.workload;
      probe.cpu_time_scale = 0;
      gpu_bound = sim::simulate(probe, *r.model, sim::default_schedule(probe, *r.model), 0).step_time_ns;
    }
    if (traced > untraced * (1 + sim::kMaxCalibratedStepDisagreement) && busy <= untraced && traced > busy &&
        gpu_bound > untraced * (1 + kCpuSideMeasuredTolerance)) {
      retimed_o = o;
      retimed_o->traced_template = r.iterations.tmpl;  // the in-time check replays the trace at its own timing
      trace::rescale_idle(r.iterations.tmpl, untraced);
      r.workload = model::build_workload(r.trace, r.iterations, *r.model);
      r.warnings.push_back(fmt::format(
          "re-timed to the measured untraced step: the traced step {:.2f} ms is {:+.1f} % longer than the {:.2f} ms "
          "the trace's meta measured without tracing (a profiler slows the CPU side: the GPU's waits for launches "
          "need not exist without it), so its idle time is scaled by {:.2f} and its {:.2f} ms of busy time kept; "
          "every figure below is of the untraced step",
          traced / 1e6, 100 * (traced / untraced - 1), untraced / 1e6, (untraced - busy) / (traced - busy), busy / 1e6));
    }
  }
  const PlanJobOptions& oo = retimed_o ? *retimed_o : o;
  // What the CPU side may give (issue 46): as traced only where an untraced measurement supports it, and the
  // trace's own measured step is weighed against the replay: it supports the waits it has room for only. Its
  // reading is taken before the calibration too, since the trace's measured power is of that untraced step.
  std::string cpu_measured_by = o.cpu_measured_by;
  double measured_step_ns = 0;
  if (cpu_measured_by.empty() && r.trace.measured.step_time_s && *r.trace.measured.step_time_s > 0) {
    cpu_measured_by = fmt::format("the trace's measured untraced step, {:.2f} ms{}", *r.trace.measured.step_time_s * 1e3,
                                  retimed_o ? " (the template re-timed to it)" : "");
    measured_step_ns = *r.trace.measured.step_time_s * 1e9;
    decide_cpu_side(r.workload, *r.model, cpu_measured_by, r.trace.format.starts_with("gearshift-trace"),
                    measured_step_ns);
  }
  std::string no_power;
  const std::optional<sim::MeasuredPower> measured =
      o.measured_power ? o.measured_power : sim::measured_power(r.trace, r.iterations, &no_power);
  if (measured && measured->samples > 0 && measured->average_power_w > 1.05 * spec.power_limit_max_w)
    throw ServiceError(Kind::kBadInput, fmt::format("{}: wrong GPU: {} give {:.0f} W on average, above the {:.0f} W maximum power "
                                      "limit of the {} spec; pass the --gpu the trace ran on",
                                      o.display_name, measured->source, measured->average_power_w,
                                      spec.power_limit_max_w, spec.name));
  if (o.model) {
    if (o.model->gpu != spec.name)
      throw ServiceError(Kind::kBadArgument, fmt::format("--model {}: calibrated on a {} GPU, the trace is planned for {}; plan with --gpu {} "
                                     "or calibrate on this GPU",
                                     o.model_path, o.model->gpu, spec.name, o.model->gpu));
    const sim::AppliedModel a = sim::apply_model(*o.model, r.workload, *r.model);
    r.calibration_source = fmt::format("model file {} (gearshift calibrate, {}): {}, board power fitted at {} clock pairs",
                                       o.model_path, o.model->created_utc, sim::applied_model_summary(a),
                                       o.model->pairs.size());
    if (a.ops_matched == 0)
      r.warnings.push_back(fmt::format("--model {}: no kernel of the trace is in the model file (another job?): its "
                                       "board power is used, the class priors for every kernel",
                                       o.model_path));
  } else if (o.calibrate && measured) {
    sim::calibrate_to_measured_power(r.workload, *r.model, measured->average_power_w);
    r.calibrated_to_w = measured->average_power_w;
    r.calibration_source = measured->source;
    // The calibration's memory/uncore power is what is left of the measured power after the priors' SM power: far
    // above what the memory can draw, it stands for power the model misplaced (short gaps drawing more than idle,
    // kernels more active than their class priors, bench/results/2026-12-01-s10-gap-power.md,
    // 2026-12-04-s24-step-anchor.md), which an SM-clock plan leaves alone but a memory-clock change would count as
    // saved. check_the_other_reading simulates the plan with it read as SM activity; where the memory reading is
    // impossible, the plan is made in that other reading when it fits (plan_in_activity_reading).
    const double mem_bound = sim::max_memory_power_w(spec);
    const model::DvfsModel calibrated = *r.model;
    auto bound = sim::calibration_bound_warnings(*r.model);
    for (auto& why : sim::implausible_calibration(*r.model)) bound.push_back("implausible: " + why);
    if (!bound.empty() && calibrated.params().memory_w_at_max > mem_bound)
      plan_in_activity_reading(r, measured->average_power_w, mem_bound, bound);
    // A fit that ends at its bound means no parameter of the model reproduces the measured power: every energy
    // figure after it would be the bound's, not the job's (measured: a traced step 69 % longer than the untraced
    // run it was calibrated to). Refuse rather than print savings of a model that does not fit.
    if (!bound.empty())
      throw ServiceError(Kind::kModelRefused,
                 fmt::format("{}: no plan: the model cannot reproduce the measured power ({} from {}): {}. Where the "
                             "trace's step differs from the measured run (a heavy profiler slows the job), record "
                             "it with `gearshift trace`; --no-calibrate plans with the uncalibrated class priors",
                             o.display_name, fmt::format("{:.0f} W", measured->average_power_w), measured->source,
                             fmt::format("{}", fmt::join(bound, "; "))));
    // Held by the calibration's figure, whichever reading the plan is made in.
    if (std::optional<sim::MemoryClockHeld> held = sim::hold_memory_clock(calibrated)) {
      r.model.emplace(held->model.spec(), r.model->params());
      model::refresh_reference_clocks(r.workload, *r.model);
      r.warnings.push_back(std::move(held->warning));
    }
  } else if (!no_power.empty()) {
    r.calibration_source = "uncalibrated: " + no_power;
  }
  // Decided again on the calibrated model (the reading above set the workload's CPU side for the calibration).
  r.cpu = decide_cpu_side(r.workload, *r.model, cpu_measured_by, r.trace.format.starts_with("gearshift-trace"),
                          measured_step_ns);
  r.cpu.profiler = profiler_cost(r.trace.profiler, r.iterations.tmpl.period_ns);
  sim::EvaluateOptions eo;
  eo.max_slowdown = o.max_slowdown;
  // L: --switch-latency-ms, else the one a --model file measured (its slower direction's median), else the spec's.
  const double measured_l_ns = o.model && o.model->switch_latency && o.model->switch_latency->plan_latency_ms() > 0
                                   ? o.model->switch_latency->plan_latency_ms() * 1e6
                                   : -1;
  const double chosen_l_ns = o.switch_latency_ns.value_or(measured_l_ns > 0 ? measured_l_ns : spec.switch_latency_ns);
  if (std::find(eo.switch_latencies_ns.begin(), eo.switch_latencies_ns.end(), chosen_l_ns) == eo.switch_latencies_ns.end())
    eo.switch_latencies_ns.push_back(chosen_l_ns);
  // Fewer, longer phases for the in-time check: 2L, 4L, ... while three phases still fit in the step.
  if (o.check_in_time && o.strategy == plan::Strategy::phase && chosen_l_ns > 0)
    for (double m = 2 * chosen_l_ns; m <= r.iterations.tmpl.period_ns / 3 && eo.min_phase_ladder_ns.size() < 4; m *= 2)
      eo.min_phase_ladder_ns.push_back(m);
  r.evaluation = sim::evaluate(r.workload, *r.model, eo);
  for (auto& c : r.evaluation.coarser) c.switch_latency_ns = chosen_l_ns;  // issued L ahead; phases >= min_phase_ns
  if (r.calibrated_to_w && r.trace.measured.step_time_s) {
    const std::string why = sim::calibrated_step_refusal(r.evaluation.baseline.step_time_ns,
                                                         *r.trace.measured.step_time_s * 1e9, *r.calibrated_to_w);
    if (!why.empty())
      throw ServiceError(Kind::kModelRefused, fmt::format("{}: no plan: {}; --no-calibrate plans with the "
                                                          "uncalibrated class priors",
                                                          o.display_name, why));
  }
  // The replay with the CPU side as traced is what checks the model against the trace's own step; a GPU-bound
  // step is shorter by design.
  for (auto& w : sim::disagreement_warnings(r.cpu.as_traced ? r.evaluation.baseline.step_time_ns : r.cpu.traced_step_ns,
                                            r.evaluation.baseline.energy_j, r.trace, r.iterations))
    r.model_warnings.push_back(std::move(w));
  for (const auto& w : r.model_warnings) r.warnings.push_back(w);
  for (const auto& s : r.evaluation.strategies) {
    if (s.schedule.strategy != o.strategy) continue;
    if (o.strategy == plan::Strategy::phase && s.switch_latency_ns != chosen_l_ns) continue;
    r.chosen = &s;
  }
  if (r.chosen == nullptr)
    throw ServiceError(Kind::kBadArgument, fmt::format("strategy '{}' was not evaluated (iteration, pass, kernel-local, "
                                                       "kernel-global, phase)", plan::to_string(o.strategy)));
  if (o.check_in_time && o.strategy == plan::Strategy::phase) check_plan_in_time(oo, r, chosen_l_ns);
  plan_if_launch_bound(r.cpu, r.workload, *r.model, eo, *r.chosen);
  if (r.calibrated_to_w) check_the_other_reading(o, r, *r.calibrated_to_w);
  sim::RangeOptions ro;
  ro.samples = o.range_samples;
  // Draws are held to a measured power (the calibration's, or the --model's fit); with none, nothing holds them.
  ro.level_normalised = r.calibrated_to_w.has_value() || static_cast<bool>(o.model);
  r.range = sim::saving_range(r.workload, *r.model, r.chosen->schedule, r.chosen->switch_latency_ns, o.max_slowdown, ro);
  if (r.chosen_in_activity_reading) sim::include_other_reading(r.range, r.chosen_in_activity_reading->saving_pct);
  r.saving_parts = sim::saving_parts(r.workload, *r.model, r.chosen->schedule, r.chosen->switch_latency_ns);
  return r;
}

nlohmann::json report_json(const PlanJobOptions& o, const PlanJobResult& r) {
  using nlohmann::json;
  const auto& it = r.iterations;
  json j;
  j["modelled"] = true;
  j["input"] = o.display_name;
  j["gpu"] = r.model->spec().name;
  j["gpu_selection"] = r.gpu.to_json();
  j["max_slowdown"] = o.max_slowdown;
  j["iterations"] = {{"count", it.iterations.size()}, {"kernels_per_iteration", it.tmpl.kernels},
                     {"ops_per_iteration", it.tmpl.ops.size()}, {"period_us", it.tmpl.period_ns / 1e3},
                     {"confidence", it.confidence}, {"method", it.method}, {"device", it.device},
                     {"micro_steps", it.evidence.micro_steps}, {"optimizer_updates_per_step", it.evidence.optimizer_updates},
                     {"excluded_steps", it.evidence.excluded_steps}, {"evidence", it.evidence.lines},
                     {"kernels_only", o.kernels_only}, {"left_out_ops", r.left_out_ops}};
  j["warnings"] = r.warnings;
  {
    const graph::StepGraph g = graph::build_step_graph(r.workload);
    j["replay"] = {{"dependency", g.dependency}, {"note", g.note}};
  }
  j["cpu_side"] = r.cpu.to_json();
  const auto& b = r.evaluation.baseline;
  j["baseline"] = {{"time_s", b.step_time_ns * 1e-9}, {"energy_j", b.energy_j}, {"average_power_w", b.average_power_w}};
  const auto& ms = r.trace.measured;
  if (ms.energy_per_step_j || ms.step_time_s) {
    json m = json::object();
    if (ms.step_time_s) m["time_s"] = *ms.step_time_s;
    if (ms.energy_per_step_j) m["energy_j"] = *ms.energy_per_step_j;
    j["measured"] = m;
  }
  j["model"] = {{"activity_scale", r.model->params().activity_scale},
                {"memory_w_at_max", r.model->params().memory_w_at_max},
                {"calibrated_to_power_w", r.calibrated_to_w ? json(*r.calibrated_to_w) : json(nullptr)},
                {"calibration_source", r.calibration_source}, {"gemm_cap_clock_source", r.gemm_clock_source}, {"low_confidence", !r.model_warnings.empty()},
                {"warnings", r.model_warnings}};
  if (r.activity_reading) {
    const auto& a = *r.activity_reading;
    json reading = {{"reached", a.reached}, {"memory_w_at_max", a.memory_w}, {"sigmas", a.sigmas},
                    {"baseline_power_w", a.baseline_power_w}, {"planned_in", r.planned_in_activity_reading}};
    if (r.chosen_in_activity_reading)
      reading["chosen_plan"] = {{"saving_pct", r.chosen_in_activity_reading->saving_pct},
                                {"slowdown_pct", r.chosen_in_activity_reading->slowdown_pct}};
    j["model"]["surplus_as_activity"] = reading;
  }
  json arr = json::array();
  for (const auto& s : r.evaluation.strategies) {
    json e = {{"name", plan::to_string(s.schedule.strategy)},
              {"switch_latency_us", s.switch_latency_ns / 1e3},
              {"time_s", s.sim.step_time_ns * 1e-9},
              {"energy_j", s.sim.energy_j},
              {"saving_pct", s.saving_pct},
              {"slowdown_pct", s.slowdown_pct},
              {"clock_changes_per_step", s.sim.clock_changes},
              {"within_budget", s.within_budget},
              {"plan_ms", static_cast<double>(s.plan_ns) / 1e6}};
    if (s.schedule.optimality_gap >= 0) e["optimality_gap"] = s.schedule.optimality_gap;
    arr.push_back(e);
  }
  j["strategies"] = arr;
  const auto& g = r.range;
  const std::string outside = sim::expected_outside_range(g);
  j["saving_range"] = {{"strategy", plan::to_string(r.chosen->schedule.strategy)},
                       {"switch_latency_us", r.chosen->switch_latency_ns / 1e3},
                       {"saving_low_pct", g.saving_low_pct},
                       {"saving_expected_pct", g.saving_expected_pct},
                       {"saving_high_pct", g.saving_high_pct},
                       {"time_low_s", g.time_low_ns * 1e-9},
                       {"time_expected_s", g.time_expected_ns * 1e-9},
                       {"time_high_s", g.time_high_ns * 1e-9},
                       {"slowdown_high_pct", g.slowdown_high_pct},
                       {"held_to_measured_power", g.level_normalised},
                       {"other_reading_saving_pct", g.other_reading_saving_pct ? json(*g.other_reading_saving_pct) : json()},
                       {"p_over_budget", g.p_over_budget},
                       {"samples", g.samples},
                       {"draws_rejected", g.draws_rejected},
                       {"share_below_expected", g.share_below_expected},
                       {"saving_median_pct", g.saving_median_pct},
                       {"expected_outside_range", outside.empty() ? json(nullptr) : json(outside)},
                       {"quantiles", {g.low_quantile, g.high_quantile}}};
  j["saving_parts"] = r.saving_parts.to_json();
  j["saving_parts"]["strategy"] = plan::to_string(r.chosen->schedule.strategy);
  j["saving_parts"]["switch_latency_us"] = r.chosen->switch_latency_ns / 1e3;
  {  // The in-time check (service/plan_in_time.hpp): every rung replayed, the last one taken.
    const InTimeCheck& c = r.in_time;
    json rungs = json::array();
    for (const auto& rung : c.rungs)
      rungs.push_back({{"plan", rung.label()},
                       {"strategy", plan::to_string(rung.plan->schedule.strategy)},
                       {"min_phase_us", std::isinf(rung.min_phase_ns) ? json(nullptr) : json(rung.min_phase_ns / 1e3)},
                       {"clock_changes_per_step", rung.plan->sim.clock_changes},
                       {"saving_pct", rung.plan->saving_pct},
                       {"in_time_fraction", rung.in_time ? json(*rung.in_time) : json(nullptr)},
                       {"boundary_errors", rung.boundary_errors}});
    j["in_time_check"] = {{"checked", c.checked}, {"skipped", c.skipped}, {"target", c.target},
                          {"switch_latency_us", c.switch_latency_ns / 1e3}, {"steps_replayed", c.steps_replayed},
                          {"anchors", c.anchors}, {"coarsened", c.coarsened()}, {"rungs", rungs},
                          {"summary", c.summary()}};
  }
  // The savings frontier (sim::Evaluation::frontier): every strategy at each slowdown budget.
  json frontier = json::array();
  for (const auto& p : r.evaluation.frontier) {
    json ss = json::array();
    for (const auto& s : p.strategies)
      ss.push_back({{"name", plan::to_string(s.schedule.strategy)},
                    {"switch_latency_us", s.switch_latency_ns / 1e3},
                    {"saving_pct", s.saving_pct},
                    {"slowdown_pct", s.slowdown_pct},
                    {"time_s", s.sim.step_time_ns * 1e-9},
                    {"energy_j", s.sim.energy_j},
                    {"within_budget", s.within_budget}});
    frontier.push_back({{"max_slowdown_pct", p.max_slowdown * 100}, {"strategies", ss}});
  }
  j["frontier"] = frontier;
  const auto& mem = r.model->spec().mem_clocks_mhz;
  j["frontier_knobs"] = {{"switch_latency_us", r.evaluation.frontier_latency_ns / 1e3},
                         {"sm_clocks", r.model->spec().sm_clocks_mhz.size()}, {"mem_clocks_mhz", mem},
                         {"memory_clock", mem.size() > 1 ? "knob" : "fixed"}};
  return j;
}

plan::PlanFile plan_file(const PlanJobOptions& o, const PlanJobResult& r) { return plan_file_for(o, r, *r.chosen); }

namespace {

plan::PlanFile plan_file_for(const PlanJobOptions& o, const PlanJobResult& r, const sim::StrategyResult& s) {
  plan::PlanFile f;
  f.gpu = r.model->spec().name;
  f.gpu_selection = plan::PlanFileGpuSelection{r.gpu.spec, r.gpu.source, r.gpu.trace_gpu, r.gpu.trace_spec};
  f.strategy = plan::to_string(s.schedule.strategy);
  f.switch_latency_us = s.switch_latency_ns / 1e3;
  f.max_slowdown = o.max_slowdown;
  f.period_us = r.iterations.tmpl.period_ns / 1e3;
  plan::PlanFilePredicted pr;
  pr.low_confidence = !r.model_warnings.empty();
  pr.time_s = s.sim.step_time_ns * 1e-9;
  pr.energy_j = s.sim.energy_j;
  pr.saving_pct = s.saving_pct;
  pr.slowdown_pct = s.slowdown_pct;
  pr.baseline_time_s = r.evaluation.baseline.step_time_ns * 1e-9;
  pr.baseline_energy_j = r.evaluation.baseline.energy_j;
  pr.clock_changes_per_step = s.sim.clock_changes;
  pr.saving_low_pct = r.range.saving_low_pct;
  pr.saving_high_pct = r.range.saving_high_pct;
  pr.time_low_s = r.range.time_low_ns * 1e-9;
  pr.time_high_s = r.range.time_high_ns * 1e-9;
  pr.p_over_budget = r.range.p_over_budget;
  pr.range_samples = static_cast<std::size_t>(r.range.samples);
  f.predicted = pr;
  for (std::size_t i = 0; i < r.workload.ops.size(); ++i) {
    const auto& op = r.workload.ops[i];
    f.positions.push_back({op.name, op.kind, op.stream, model::to_string(op.cls), model::to_string(op.pass),
                           op.ref_time_ns / 1e3, op.start_offset_ns / 1e3, s.schedule.clocks[i], op.graph_id,
                           op.graph_launch});
    if (op.ref_launch_ns) f.positions.back().launch_offset_us = *op.ref_launch_ns / 1e3;
  }
  for (const auto& ph : plan::phases_of(s.schedule))
    f.phases.push_back({ph.first, ph.last, r.workload.ops[ph.first].name, ph.clocks});
  for (const auto& v : r.variants) f.variants.push_back({v.after, v.ops, v.skip, v.steps});
  f.model = plan::model_section(r.model->params(), r.calibrated_to_w);
  if (o.model) f.model->coefficients = r.calibration_source + "; otherwise: " + f.model->coefficients;
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  nlohmann::json meta = nlohmann::json::parse(r.trace.meta_json, nullptr, false);
  plan::PlanFileProvenance v;
  v.input = o.display_name;
  v.format = r.trace.format;
  v.trace_meta = meta.is_discarded() ? nlohmann::json(nullptr) : meta;
  v.iterations = r.iterations.iterations.size();
  v.iteration_method = r.iterations.method;
  v.step_confidence = r.iterations.confidence;
  v.device = r.iterations.device;
  v.warnings = r.warnings;
  v.step_evidence = r.iterations.evidence.lines;
  v.created = buf;
  v.gearshift_version = kVersion;
  f.provenance = std::move(v);
  return f;
}

void check_plan_in_time(const PlanJobOptions& o, PlanJobResult& r, double l_ns) {
  const sim::StrategyResult* one_pair = nullptr;
  for (const auto& s : r.evaluation.strategies)
    if (s.schedule.strategy == plan::Strategy::iteration) one_pair = &s;
  if (r.chosen->sim.clock_changes == 0 || l_ns <= 0 || !one_pair) {
    r.in_time.skipped = r.chosen->sim.clock_changes == 0 ? "no clock change inside the step" : "no switch latency";
    return;
  }
  auto rung = [](const sim::StrategyResult* p, double min_phase_ns) {
    InTimeRung g;
    g.plan = p;
    g.min_phase_ns = min_phase_ns;
    return g;
  };
  // Rungs of fewer changes per step, each with other clocks than the one before; the one-pair plan last.
  std::vector<InTimeRung> ladder{rung(r.chosen, 0)};
  for (const auto& c : r.evaluation.coarser) {
    const sim::StrategyResult& prev = *ladder.back().plan;
    if (c.within_budget && c.sim.clock_changes > 0 && c.sim.clock_changes < prev.sim.clock_changes &&
        c.schedule.clocks != prev.schedule.clocks)
      ladder.push_back(rung(&c, c.min_phase_ns));
  }
  ladder.push_back(rung(one_pair, std::numeric_limits<double>::infinity()));
  // The trace's timing is the traced one: where the template was re-timed, the positions take it back.
  const trace::IterationTemplate* traced = nullptr;
  if (o.traced_template && o.traced_template->ops.size() == r.workload.ops.size()) traced = &*o.traced_template;
  auto clock_plan_of = [&](const sim::StrategyResult& s) {
    plan::PlanFile f = plan_file_for(o, r, s);
    if (traced) {
      f.period_us = traced->period_ns / 1e3;
      for (std::size_t i = 0; i < f.positions.size(); ++i) {
        const trace::TemplateOp& t = traced->ops[i];
        f.positions[i].duration_us = t.duration_ns / 1e3;
        f.positions[i].start_offset_us = t.start_offset_ns / 1e3;
        f.positions[i].launch_offset_us = t.ref_launch_ns ? std::optional<double>(*t.ref_launch_ns / 1e3) : std::nullopt;
      }
    }
    return runtime::clock_plan_from(f);
  };
  r.in_time = check_in_time(r.trace, r.iterations, ladder, clock_plan_of, l_ns);
  if (!r.in_time.checked || !r.in_time.coarsened()) return;
  const InTimeRung& first = r.in_time.rungs.front();
  const InTimeRung& taken = *r.in_time.taken();
  r.warnings.push_back(fmt::format(
      "{} landed its clock changes in time for {:.1f} % of the kernel time when replayed on this trace's first {} "
      "steps, below the {:.0f} % the runtime needs ({}): planned with {} instead, {} changes per step, MODELLED "
      "saving {:.2f} % instead of {:.2f} %",
      first.label(), 100 * first.in_time.value_or(0), r.in_time.steps_replayed, 100 * r.in_time.target,
      first.boundary_errors, taken.label(), taken.plan->sim.clock_changes, taken.plan->saving_pct,
      first.plan->saving_pct));
  r.chosen = taken.plan;
}

void plan_in_activity_reading(PlanJobResult& r, double measured_w, double memory_bound_w,
                              std::vector<std::string>& why) {
  model::Workload w = r.workload;
  model::DvfsModel m = *r.model;
  const sim::SurplusAsActivity a = sim::place_surplus_as_activity(w, m, measured_w, memory_bound_w);
  r.activity_reading = a;
  std::vector<std::string> still = sim::calibration_bound_warnings(m);
  for (auto& s : sim::implausible_calibration(m)) still.push_back("implausible: " + s);
  if (!a.reached || !still.empty()) {
    why.push_back(
        !a.reached
            ? fmt::format("nor is it reached with that power read as SM activity (memory/uncore at the {:.0f} W memory "
                          "can draw): the non-GEMM kernels' activity raised by {:g} standard deviations of their class "
                          "priors' measured error gives {:.0f} W",
                          memory_bound_w, sim::kMaxReadingSigmas, a.baseline_power_w)
            : fmt::format("read as SM activity instead: {}", fmt::join(still, "; ")));
    return;
  }
  r.activity_reading_note = fmt::format(
      "the calibration's reading of the measured {:.0f} W is impossible ({}); planned in the other reading: "
      "memory/uncore power {:.0f} W (the most memory can draw), the non-GEMM kernels' activity raised by {:.2f} "
      "standard deviations of their class priors' measured error (at most {:g}; none above a dense GEMM's)",
      measured_w, fmt::join(why, "; "), memory_bound_w, a.sigmas, sim::kMaxReadingSigmas);
  r.warnings.push_back(r.activity_reading_note);
  r.planned_in_activity_reading = true;
  r.workload = std::move(w);
  r.model.emplace(std::move(m));
  why.clear();
}

void check_the_other_reading(const PlanJobOptions& o, PlanJobResult& r, double measured_w) {
  const double bound_w = sim::max_memory_power_w(r.model->spec());
  if (r.planned_in_activity_reading || !(r.model->params().memory_w_at_max > bound_w) || !r.chosen->within_budget)
    return;
  model::Workload w = r.workload;
  model::DvfsModel m = *r.model;
  const sim::SurplusAsActivity a = sim::place_surplus_as_activity(w, m, measured_w, bound_w);
  r.activity_reading = a;
  if (!a.reached) return;  // only the memory reading reproduces the measured power: it stands alone
  const sim::PlanUnderReading p = sim::plan_under(w, m, r.chosen->schedule, r.chosen->switch_latency_ns);
  r.chosen_in_activity_reading = p;
  r.activity_reading_note =
      sim::other_reading_intro(r.model->params().memory_w_at_max, bound_w, a.sigmas, measured_w) +
      fmt::format(" the plan a MODELLED saving of {:.2f} % at {:.2f} % step time (in the memory reading, which the "
                  "figures above are: {:.2f} % at {:.2f} %)",
                  p.saving_pct, p.slowdown_pct, r.chosen->saving_pct, r.chosen->slowdown_pct);
  if (const std::string why = sim::refusal_in_reading(p, o.max_slowdown); !why.empty())
    throw ServiceError(Kind::kModelRefused,
                       fmt::format("{}: no plan: one measured power cannot tell which reading is the GPU's, and in "
                                   "one of them the plan {}: {}",
                                   o.display_name, why, r.activity_reading_note));
  r.warnings.push_back(r.activity_reading_note);
}

}  // namespace

nlohmann::json plan_file_json(const PlanJobOptions& o, const PlanJobResult& r) { return plan::to_json(plan_file(o, r)); }

}  // namespace gearshift::service
