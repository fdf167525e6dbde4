#include "service/evaluate_pipeline.hpp"

#include <cmath>
#include <istream>
#include <iterator>

#include <fmt/format.h>

#include "pipeline/error.hpp"
#include "service/error.hpp"
#include "trace/gz_stream.hpp"

namespace gearshift::service {

namespace {

using Kind = ServiceError::Kind;

}  // namespace

std::string read_plan_text(const std::string& path) {
  try {
    trace::GzStreamBuf buf(path);
    std::istream in(&buf);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!buf.error().empty()) throw ServiceError(Kind::kBadPlan, path + ": " + buf.error());
    return text;
  } catch (const ServiceError&) {
    throw;
  } catch (const std::exception& e) {
    throw ServiceError(Kind::kBadPlan, e.what());
  }
}

namespace {

template <typename T>
T settle(const std::optional<T>& option, const std::optional<T>& file, T fallback, const char* flag,
         const std::string& plan) {
  if (option && file && *option != *file)
    throw ServiceError(Kind::kBadArgument, fmt::format("{} {} contradicts the plan {} ({})", flag, *option, plan, *file));
  return option ? *option : file ? *file : fallback;
}

}  // namespace

PipelineEvaluateResult evaluate_pipeline_plan(const PipelineEvaluateOptions& o) {
  using namespace pipeline;
  if (o.time_unit_ms && (!(*o.time_unit_ms > 0) || !std::isfinite(*o.time_unit_ms)))
    throw ServiceError(Kind::kBadArgument, "--time-unit-ms must be > 0");
  if (o.blocking_power_w && (!(*o.blocking_power_w >= 0) || !std::isfinite(*o.blocking_power_w)))
    throw ServiceError(Kind::kBadArgument, "--blocking-power-w must be ≥ 0");
  if (o.cost_model && *o.cost_model != "hull" && *o.cost_model != "exp-fit")
    throw ServiceError(Kind::kBadArgument, "--cost-model must be hull or exp-fit");
  if (o.lag_ms && !o.overhead_from)
    throw ServiceError(Kind::kBadArgument, "--lag-ms needs --overhead-from (the lag is added with the fitted overhead)");
  if (o.lag_ms && (!(*o.lag_ms >= 0) || !std::isfinite(*o.lag_ms)))
    throw ServiceError(Kind::kBadArgument, "--lag-ms must be ≥ 0");
  PlanFile plan;
  try {
    plan = parse_plan_file(read_plan_text(o.plan_path), o.plan_path);
  } catch (const PipelineError& e) {
    throw ServiceError(Kind::kBadPlan, e.what());
  }
  PipelineEvaluateResult r;
  r.format = plan.format;
  r.plan_path = o.plan_path;
  r.profile_path = o.profile_path;
  const std::string kind = plan_format_name(plan.format);
  const std::string sched = settle<std::string>(o.schedule, plan.schedule, "1f1b", "--schedule", kind);
  PipelineProblem& p = r.problem;
  p.stages = settle<int>(o.stages, plan.stages, 0, "--stages", kind);
  p.chunks = settle<int>(o.virtual_stages, plan.virtual_stages, 1, "--virtual-stages", kind);
  // A lowtime file of bare clocks does not say M: unless given, rank 0's count / 2 (a 1F1B rank without recompute
  // runs 2·M computations); a wrong guess is then refused by the length check.
  p.microbatches = plan.microbatches
                       ? settle<int>(o.microbatches, plan.microbatches, 0, "--microbatches", kind)
                       : o.microbatches.value_or(static_cast<int>(plan.plans.at(0).ranks.at(0).size()) / (2 * p.chunks));
  // The grid, power and cost model: the command line's where given (a duration off that grid is then refused),
  // else the planner's own as the file records them, so that its plans evaluate to its figures.
  p.model.unit_s = o.time_unit_ms ? *o.time_unit_ms * 1e-3 : plan.time_unit_s.value_or(1e-3);
  p.model.blocking_power_w = o.blocking_power_w ? *o.blocking_power_w : plan.blocking_power_w.value_or(0.0);
  const std::string cost = o.cost_model ? *o.cost_model : plan.cost_model.value_or("hull");
  p.model.kind = cost == "exp-fit" ? CostModelKind::kExpFit : CostModelKind::kHull;
  if (p.stages < 1 || p.microbatches < 1)
    throw ServiceError(Kind::kBadPlan, fmt::format("{}: a pipeline of {} stages x {} microbatches", o.plan_path,
                                                   p.stages, p.microbatches));
  StageModels models;
  PipelineDag dag;
  Profile profile;
  try {
    p.schedule = parse_schedule(sched);
    profile = read_profile(o.profile_path);
    models = build_models(profile, p.stages, p.model);  // the planner's cost models (plan_pipeline's first step)
  } catch (const PipelineError& e) {
    throw ServiceError(Kind::kBadProfile, e.what());
  }
  try {
    dag = build_dag(p.schedule, p.stages, p.microbatches, p.chunks, models.recompute);
    for (const auto& s : plan.plans) r.evaluations.push_back(evaluate_schedule(dag, models, profile, s));
  } catch (const PipelineError& e) {
    throw ServiceError(Kind::kBadPlan, e.what());
  }
  if (o.overhead_from) {
    std::string text;
    try {
      text = read_plan_text(*o.overhead_from);
    } catch (const ServiceError& e) {
      throw ServiceError(Kind::kBadInput, std::string("--overhead-from ") + e.what());
    }
    try {
      const MeasuredRun run = parse_measured_run(text, *o.overhead_from);
      r.left_out = fit_left_out_time(dag, run, o.lag_ms.value_or(0.0) * 1e-3);
    } catch (const PipelineError& e) {
      throw ServiceError(Kind::kBadInput, std::string("--overhead-from ") + e.what());
    }
    for (auto& ev : r.evaluations) add_left_out_time(ev, dag, *r.left_out, p.model.blocking_power_w);
  }
  return r;
}

std::string evaluation_text(const PipelineEvaluateResult& r) {
  const auto& p = r.problem;
  std::string o;
  o += fmt::format("evaluate {} ({}) on {}\n", r.plan_path, plan_format_name(r.format), r.profile_path);
  o += fmt::format("pipeline {} S={} M={} v={}  cost model {}  unit {} ms  blocking {} W/GPU\n",
                   pipeline::schedule_name(p.schedule), p.stages, p.microbatches, p.chunks,
                   p.model.kind == pipeline::CostModelKind::kHull ? "hull" : "exp-fit", p.model.unit_s * 1e3,
                   p.model.blocking_power_w);
  o += "Every figure below is MODELLED from the profile (the planner's DAG and cost model), not measured.\n";
  if (const auto& lo = r.left_out)
    o += fmt::format("left-out time (sends/receives, optimizer step, syncs): lag {:.3f} ms per cross-stage edge (given), "
                     "overhead {:.4f} s per iteration fitted from {} (MEASURED iteration {:.4f} s, its graph {:.4f} s, "
                     "{} cross-stage edges on its longest path); waiting at {} W/GPU\n",
                     lo->lag_s * 1e3, lo->overhead_s, lo->source, lo->measured_iteration_s, lo->graph_s, lo->crossings,
                     p.model.blocking_power_w);
  else
    o += "left-out time (sends/receives, loads, optimizer step, syncs): absent; the graph is compute only "
         "(--overhead-from MEASURED fits it)\n";
  for (const auto& e : r.evaluations) {
    o += fmt::format("plan {}: iteration {:.4f} s, energy {:.2f} J (compute {:.2f} J + blocking {:.2f} J)\n", e.name,
                     e.iteration_time_s, e.energy_j, e.compute_j, e.blocking_j);
    if (r.left_out)
      o += fmt::format("  of which left out by the graph: {:.4f} s, {:.2f} J\n", e.left_out_s, e.left_out_j);
    o += "  rank   busy_s   idle_s  idle_%  energy_J  clocks_MHz\n";
    for (std::size_t k = 0; k < e.ranks.size(); ++k) {
      const auto& u = e.ranks[k];
      o += fmt::format("  {:>4} {:>8.4f} {:>8.4f} {:>6.2f}  {:>8.2f}  {}\n", k, u.busy_s, u.idle_s,
                       e.iteration_time_s > 0 ? 100 * u.idle_s / e.iteration_time_s : 0.0, u.energy_j,
                       u.clock_min_mhz ? fmt::format("{}-{}", u.clock_min_mhz, u.clock_max_mhz) : "-");
    }
  }
  return o;
}

nlohmann::json evaluation_json(const PipelineEvaluateResult& r) {
  const auto& p = r.problem;
  nlohmann::json j = {{"modelled", true},
                      {"plan", r.plan_path},
                      {"plan_format", plan_format_name(r.format)},
                      {"profile", r.profile_path},
                      {"schedule", pipeline::schedule_name(p.schedule)},
                      {"stages", p.stages},
                      {"microbatches", p.microbatches},
                      {"virtual_stages", p.chunks},
                      {"cost_model", p.model.kind == pipeline::CostModelKind::kHull ? "hull" : "exp-fit"},
                      {"time_unit_s", p.model.unit_s},
                      {"blocking_power_w", p.model.blocking_power_w},
                      {"plans", nlohmann::json::array()}};
  if (const auto& lo = r.left_out)
    j["left_out_time"] = {{"absent", false},
                          {"fitted_from", lo->source},
                          {"lag_s", lo->lag_s},
                          {"lag_fitted", false},
                          {"overhead_s", lo->overhead_s},
                          {"measured_iteration_s", lo->measured_iteration_s},
                          {"graph_s", lo->graph_s},
                          {"crossings", lo->crossings}};
  else
    j["left_out_time"] = {{"absent", true}};
  for (const auto& e : r.evaluations) {
    nlohmann::json ranks = nlohmann::json::array();
    for (std::size_t k = 0; k < e.ranks.size(); ++k)
      ranks.push_back({{"rank", k},
                       {"busy_s", e.ranks[k].busy_s},
                       {"idle_s", e.ranks[k].idle_s},
                       {"energy_j", e.ranks[k].energy_j},
                       {"clock_min_mhz", e.ranks[k].clock_min_mhz},
                       {"clock_max_mhz", e.ranks[k].clock_max_mhz}});
    j["plans"].push_back({{"name", e.name},
                          {"iteration_time_s", e.iteration_time_s},
                          {"iteration_units", e.T},
                          {"energy_j", e.energy_j},
                          {"compute_energy_j", e.compute_j},
                          {"blocking_energy_j", e.blocking_j},
                          {"left_out_s", e.left_out_s},
                          {"left_out_energy_j", e.left_out_j},
                          {"ranks", std::move(ranks)}});
  }
  return j;
}

}  // namespace gearshift::service
