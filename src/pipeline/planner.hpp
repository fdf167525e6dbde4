// Pipeline energy planner: profile + schedule -> DAG + per-operation cost models -> frontier, and the choice of
// a point on it (Perseus, Chung et al., SOSP'24). All energies are modelled, not measured.
#pragma once

#include <optional>
#include <vector>

#include "pipeline/cost_model.hpp"
#include "pipeline/dag.hpp"
#include "pipeline/frontier.hpp"
#include "pipeline/profile.hpp"

namespace gearshift::pipeline {

struct PipelineProblem {
  PipelineSchedule schedule = PipelineSchedule::k1F1B;
  int stages = 0;
  int microbatches = 0;
  int chunks = 1;  // virtual stages per rank (interleaved 1F1B)
  ModelParams model;
};

struct PipelinePlan {
  PipelineProblem problem;
  PipelineDag dag;
  StageModels models;
  Frontier frontier;
  const OperationModel& model_of(int op) const;
};

// Throws PipelineError on bad profile or parameters.
PipelinePlan plan_pipeline(const Profile& profile, const PipelineProblem& problem);

// Frontier input for a DAG and its models (exposed for tests and benchmarks).
FrontierInput frontier_input(const PipelineDag& dag, const StageModels& models);

// A chosen operating point for an iteration deadline D [s]: the frontier point with T·u ≤ D of least compute
// energy; the GPUs then wait (blocking power) until D. energy_j = compute + gpus·D·P.
struct Selection {
  std::size_t point = 0;   // index into frontier.points
  double deadline_s = 0;   // D [s]
  double energy_j = 0;     // modelled energy of one iteration up to D [J]
  double baseline_j = 0;   // all instructions at their fastest option, then waiting until D [J]
  double saving() const { return baseline_j > 0 ? 1.0 - energy_j / baseline_j : 0.0; }
};

// nullopt when D is below T_min·u.
std::optional<Selection> select_for_deadline(const PipelinePlan& plan, double deadline_s);

// Compute energy [J] with every operation at its fastest duration (q_min): the all-max-clock baseline.
double all_fastest_compute_j(const PipelinePlan& plan);
int all_fastest_makespan(const PipelinePlan& plan);

}  // namespace gearshift::pipeline
