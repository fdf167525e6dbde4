// Up-front estimate of what computing a pipeline's frontier costs, so that a job too large to plan in reasonable
// time is refused before the work rather than by a fixed instruction count (issue 48).
//
// The unit-step solver (frontier.hpp) takes one step per time unit between the all-slowest makespan T_max and the
// all-fastest T_min (each step shortens T by at least one), and a step costs about one pass over the instructions
// (the critical-path passes, the scan for changed operations, the flow's tree repair: the cut moves across the
// pipeline from step to step). So
//   seconds ≈ kFrontierSecondsPerInstructionStep · instructions · (T_max − T_min).
// The constant is MEASURED (bench/pipeline_bench, 2-core machine, 2026-12-07; bench/results/2026-12-07-pipeline-
// scale.md): the largest per-instruction-step cost among the benchmark's cases, so the estimate errs long.
#pragma once

#include "pipeline/planner.hpp"

namespace gearshift::pipeline {

inline constexpr double kFrontierSecondsPerInstructionStep = 5.3e-8;  // [s], see above

struct FrontierCost {
  long long instructions = 0;  // forward, backward and recompute operations
  long long steps = 0;         // T_max − T_min [units], or a lower bound of it when `bound`
  bool bound = false;          // the DAG was not built: steps is a lower bound (see estimate_frontier_cost)
  double seconds() const {
    return kFrontierSecondsPerInstructionStep * static_cast<double>(instructions) * static_cast<double>(steps);
  }
};

// The estimate for `problem` on `profile`. When even a lower bound of the steps, from the models alone, puts
// the estimate above `limit_s` (or the instructions would not fit the solver's int indices), that bound is
// returned without building the DAG: the critical path at all-fastest durations has at least
// T_min / max q_min operations, T_min is at least each rank's fastest total work, and every operation on it
// lengthens by at least min(q_max − q_min) at all-slowest durations. Otherwise the DAG is built and the exact
// T_max − T_min returned. Throws PipelineError as plan_pipeline() does for a bad profile or shape.
FrontierCost estimate_frontier_cost(const Profile& profile, const PipelineProblem& problem, double limit_s);

}  // namespace gearshift::pipeline
