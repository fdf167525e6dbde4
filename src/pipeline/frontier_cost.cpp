#include "pipeline/frontier_cost.hpp"

#include <algorithm>
#include <limits>

namespace gearshift::pipeline {

FrontierCost estimate_frontier_cost(const Profile& profile, const PipelineProblem& problem, double limit_s) {
  const StageModels models = build_models(profile, problem.stages, problem.model);
  const std::vector<Instruction> kinds =
      models.recompute ? std::vector<Instruction>{Instruction::kForward, Instruction::kBackward, Instruction::kRecompute}
                       : std::vector<Instruction>{Instruction::kForward, Instruction::kBackward};
  const long long per_rank = static_cast<long long>(problem.microbatches) * std::max(1, problem.chunks);
  FrontierCost c;
  c.instructions = per_rank * problem.stages * static_cast<long long>(kinds.size());
  // The lower bound of the steps (see the header), from the models alone.
  long long rank_fastest = 0;  // the largest fastest total work of one rank [units]
  int max_q_min = 1, min_span = std::numeric_limits<int>::max();
  for (int s = 0; s < problem.stages; ++s) {
    long long work = 0;
    for (Instruction i : kinds) {
      const auto& m = models.at(s, i);
      work += per_rank * m.q_min();
      max_q_min = std::max(max_q_min, m.q_min());
      min_span = std::min(min_span, m.q_max() - m.q_min());
    }
    rank_fastest = std::max(rank_fastest, work);
  }
  c.steps = rank_fastest / max_q_min * min_span;
  c.bound = true;
  if (c.seconds() > limit_s || c.instructions > std::numeric_limits<int>::max() / 4) return c;
  const PipelineDag dag = build_dag(problem.schedule, problem.stages, problem.microbatches, problem.chunks,
                                    models.recompute);
  const FrontierInput in = frontier_input(dag, models);
  std::vector<int> slowest, fastest;
  for (const auto& t : in.costs) {
    slowest.push_back(t.q_max());
    fastest.push_back(t.q_min);
  }
  c.steps = static_cast<long long>(makespan(in, slowest)) - makespan(in, fastest);
  c.bound = false;
  return c;
}

}  // namespace gearshift::pipeline
