// `gearshift pipeline PROFILE --evaluate PLAN`: one given clock plan (gearshift schedules.json, lowtime freqs file
// or Perseus sched.json; pipeline/plan_formats.hpp) evaluated on the planner's own DAG and cost model
// (pipeline/evaluate.hpp): MODELLED iteration time [s], energy [J] and per-rank busy/idle [s].
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/evaluate.hpp"
#include "pipeline/left_out_time.hpp"
#include "pipeline/plan_formats.hpp"
#include "pipeline/planner.hpp"

namespace gearshift::service {

// Unset options come from the plan file where it records them (gearshift's schedules.json: schedule, shape, time
// unit, blocking power, cost model; Perseus: shape from Merak's order), else from `gearshift pipeline`'s defaults.
struct PipelineEvaluateOptions {
  std::string profile_path;  // stage profile CSV
  std::string plan_path;     // the plan (plain or gzip-compressed)
  std::optional<std::string> schedule;
  std::optional<int> stages, microbatches, virtual_stages;
  std::optional<double> time_unit_ms;      // time grid unit [ms] (> 0)
  std::optional<double> blocking_power_w;  // per-GPU power while waiting [W] (≥ 0)
  std::optional<std::string> cost_model;   // hull or exp-fit
  // Time the graph leaves out (pipeline/left_out_time.hpp): a Perseus prof.json(.gz) of a measured all-max-clock run
  // of the same pipeline to fit the per-iteration overhead from; lag per cross-stage edge [ms] (≥ 0, default 0;
  // only with overhead_from: one measured iteration cannot tell it from the overhead).
  std::optional<std::string> overhead_from;
  std::optional<double> lag_ms;
};

struct PipelineEvaluateResult {
  pipeline::PlanFormat format = pipeline::PlanFormat::kGearshiftSchedules;
  std::string plan_path, profile_path;
  pipeline::PipelineProblem problem;
  std::vector<pipeline::Evaluation> evaluations;  // one per plan in the file
  std::optional<pipeline::LeftOutTime> left_out;  // fitted and added to every evaluation; absent without overhead_from
};

// A plan or measured-run file's text, gunzipped when it is gzip. Throws ServiceError(kBadPlan) when unreadable.
std::string read_plan_text(const std::string& path);

// Throws ServiceError: kBadArgument for an option out of range or contradicting the plan file (another stage or
// microbatch count, a schedule other than 1f1b for lowtime/Perseus), kBadPlan for the plan (unreadable, unknown
// format, or not fitting the pipeline: the PipelineError's one line), kBadProfile for the profile, kBadInput for the
// overhead_from run (unreadable, fields missing, another rank or microbatch count, graph longer than measured).
PipelineEvaluateResult evaluate_pipeline_plan(const PipelineEvaluateOptions& o);

std::string evaluation_text(const PipelineEvaluateResult& r);
nlohmann::json evaluation_json(const PipelineEvaluateResult& r);

}  // namespace gearshift::service
