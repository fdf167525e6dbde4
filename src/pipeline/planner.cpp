#include "pipeline/planner.hpp"

#include <limits>

namespace gearshift::pipeline {

const OperationModel& PipelinePlan::model_of(int op) const {
  const auto& o = dag.ops[static_cast<std::size_t>(op)];
  return models.at(o.rank, o.instruction);
}

FrontierInput frontier_input(const PipelineDag& dag, const StageModels& models) {
  FrontierInput in;
  in.num_ops = static_cast<int>(dag.ops.size());
  in.edges = dag.edges;
  in.gpus = dag.stages;
  in.unit_s = models.params.unit_s;
  in.blocking_power_w = models.params.blocking_power_w;
  for (const auto& o : dag.ops) {
    const auto& m = models.at(o.rank, o.instruction);
    CostTable t;
    t.q_min = m.q_min();
    for (int d = m.q_min(); d <= m.q_max(); ++d) t.cost.push_back(m.cost(d));
    in.costs.push_back(std::move(t));
  }
  return in;
}

PipelinePlan plan_pipeline(const Profile& profile, const PipelineProblem& problem) {
  PipelinePlan p;
  p.problem = problem;
  p.models = build_models(profile, problem.stages, problem.model);
  p.dag = build_dag(problem.schedule, problem.stages, problem.microbatches, problem.chunks, p.models.recompute);
  p.frontier = compute_frontier(frontier_input(p.dag, p.models));
  return p;
}

double all_fastest_compute_j(const PipelinePlan& plan) {
  double e = 0;
  for (std::size_t i = 0; i < plan.dag.ops.size(); ++i) {
    const auto& m = plan.model_of(static_cast<int>(i));
    e += m.cost(m.q_min());
  }
  return e;
}

int all_fastest_makespan(const PipelinePlan& plan) {
  auto in = frontier_input(plan.dag, plan.models);
  std::vector<int> d;
  for (const auto& c : in.costs) d.push_back(c.q_min);
  return makespan(in, d);
}

std::optional<Selection> select_for_deadline(const PipelinePlan& plan, double deadline_s) {
  const auto& fr = plan.frontier;
  const double u = fr.unit_s;
  std::optional<Selection> best;
  double best_compute = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < fr.points.size(); ++k) {
    // Tolerate float noise in D (e.g. 1.01·T_min·u) by comparing in units.
    if (fr.points[k].T > deadline_s / u + 1e-9) continue;
    if (fr.points[k].compute_j < best_compute) {
      best_compute = fr.points[k].compute_j;
      best = Selection{k, deadline_s, 0, 0};
    }
  }
  if (!best) return best;
  const double wait = fr.gpus * deadline_s * fr.blocking_power_w;
  best->energy_j = best_compute + wait;
  best->baseline_j = all_fastest_compute_j(plan) + wait;
  return best;
}

}  // namespace gearshift::pipeline
