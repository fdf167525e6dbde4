// The pipeline-parallel job for every face (`gearshift pipeline`, gearshift.distributed): a stage profile and
// the pipeline's shape -> the time–energy frontier (pipeline/planner.hpp) and its summary rows
// (pipeline/report.hpp). Every energy is modelled from the profile.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "pipeline/planner.hpp"
#include "pipeline/report.hpp"

namespace gearshift::service {

// The default limit [s]: a job whose frontier is estimated (pipeline/frontier_cost.hpp) to take longer than
// PipelineJobOptions::max_solve_seconds on the 2-core reference machine is refused with kBadArgument after reading
// the profile, before the frontier (`gearshift pipeline --max-solve-s`).
inline constexpr double kMaxPipelineSolveSeconds = 60;

struct PipelineJobOptions {
  std::string profile_path;     // the stage profile CSV (pipeline/profile.hpp) ...
  std::string profile_text;     // ... or its text, when not empty (profile_path then only names it in messages)
  std::string schedule = "1f1b";  // gpipe, 1f1b, interleaved
  int stages = 0;
  int microbatches = 0;
  int virtual_stages = 1;       // model chunks per rank (interleaved 1F1B)
  double time_unit_ms = 1.0;    // time grid unit, ms (> 0)
  double blocking_power_w = 0;  // per-GPU power while waiting, W (>= 0)
  std::string cost_model = "hull";  // hull or exp-fit
  double straggler = 1.2;       // another pipeline takes straggler·T_min (>= 1)
  double deadline_ms = 0;       // > 0: also a row for this iteration deadline, ms
  double max_solve_seconds = kMaxPipelineSolveSeconds;  // refuse a frontier estimated to take longer, s (> 0)
};

struct PipelineJobResult {
  pipeline::PipelinePlan plan;
  pipeline::Summary summary;  // solve_seconds measured
};

// Throws ServiceError: kBadArgument for a parameter out of range or unknown (an estimated solve time over
// max_solve_seconds too), kBadProfile for the profile or a pipeline it cannot plan (the PipelineError's one line).
PipelineJobResult run_pipeline_job(const PipelineJobOptions& o);

// {"summary": pipeline::summary_json, "schedules": pipeline::schedules_json}: the job's result as one document.
nlohmann::json pipeline_job_json(const PipelineJobResult& r);

}  // namespace gearshift::service
