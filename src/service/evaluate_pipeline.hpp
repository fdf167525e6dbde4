// `gearshift pipeline PROFILE --evaluate PLAN`: one given clock plan (gearshift schedules.json, lowtime freqs file
// or Perseus sched.json; pipeline/plan_formats.hpp) evaluated on the planner's own DAG and cost model
// (pipeline/evaluate.hpp): MODELLED iteration time [s], energy [J] and per-rank busy/idle [s].
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/evaluate.hpp"
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
};

struct PipelineEvaluateResult {
  pipeline::PlanFormat format = pipeline::PlanFormat::kGearshiftSchedules;
  std::string plan_path, profile_path;
  pipeline::PipelineProblem problem;
  std::vector<pipeline::Evaluation> evaluations;  // one per plan in the file
};

// Throws ServiceError: kBadArgument for an option out of range or contradicting the plan file (another stage or
// microbatch count, a schedule other than 1f1b for lowtime/Perseus), kBadPlan for the plan (unreadable, unknown
// format, or not fitting the pipeline: the PipelineError's one line), kBadProfile for the profile.
PipelineEvaluateResult evaluate_pipeline_plan(const PipelineEvaluateOptions& o);

std::string evaluation_text(const PipelineEvaluateResult& r);
nlohmann::json evaluation_json(const PipelineEvaluateResult& r);

}  // namespace gearshift::service
