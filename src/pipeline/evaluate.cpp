#include "pipeline/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <fmt/core.h>

#include "pipeline/error.hpp"
#include "pipeline/frontier.hpp"

namespace gearshift::pipeline {

namespace {

using RowsByClock = std::map<int, const ProfileRow*>;

// The profile's rows of one (stage, instruction), by clock.
std::map<std::pair<int, Instruction>, RowsByClock> index_profile(const Profile& p) {
  std::map<std::pair<int, Instruction>, RowsByClock> ix;
  for (const auto& r : p.rows) ix[{r.stage, r.instruction}][r.sm_clock_mhz] = &r;
  return ix;
}

std::string nearest_clocks(const RowsByClock& rows, int mhz) {
  auto hi = rows.lower_bound(mhz);
  std::vector<int> near;
  if (hi != rows.begin()) near.push_back(std::prev(hi)->first);
  if (hi != rows.end()) near.push_back(hi->first);
  if (near.size() == 2) return fmt::format("nearest {} and {} MHz", near[0], near[1]);
  return fmt::format("nearest {} MHz", near.at(0));
}

std::string op_name(const DagOp& o) {
  return fmt::format("{} of microbatch {}{}", instruction_name(o.instruction), o.microbatch,
                     o.chunk ? fmt::format(" chunk {}", o.chunk) : "");
}

}  // namespace

Evaluation evaluate_schedule(const PipelineDag& dag, const StageModels& models, const Profile& profile,
                             const ClockSchedule& sch) {
  const double u = models.params.unit_s;
  const double P = models.params.blocking_power_w;
  if (static_cast<int>(sch.ranks.size()) != dag.stages)
    throw PipelineError(fmt::format("{}: plan '{}' has {} ranks; the pipeline has {} stages", sch.source, sch.name,
                                    sch.ranks.size(), dag.stages));
  const auto ix = index_profile(profile);
  bool lists_recompute = false;
  for (const auto& steps : sch.ranks)
    for (const auto& st : steps) lists_recompute |= st.instruction == Instruction::kRecompute;

  std::vector<int> d(dag.ops.size(), 0);
  std::vector<double> e(dag.ops.size(), 0.0);
  Evaluation ev;
  ev.name = sch.name;
  ev.ranks.resize(static_cast<std::size_t>(dag.stages));
  for (int r = 0; r < dag.stages; ++r) {
    const auto& order = dag.rank_order[static_cast<std::size_t>(r)];
    const auto& steps = sch.ranks[static_cast<std::size_t>(r)];
    std::size_t expected = order.size();
    if (!lists_recompute)
      expected -= static_cast<std::size_t>(std::count_if(order.begin(), order.end(), [&](int op) {
        return dag.ops[static_cast<std::size_t>(op)].instruction == Instruction::kRecompute;
      }));
    if (steps.size() != expected)
      throw PipelineError(fmt::format("{}: plan '{}' rank {}: {} computations; the DAG of {} stages x {} microbatches "
                                      "runs {} on this rank",
                                      sch.source, sch.name, r, steps.size(), dag.stages, dag.microbatches, expected));
    RankUse& use = ev.ranks[static_cast<std::size_t>(r)];
    std::size_t k = 0;
    for (int op : order) {
      const DagOp& o = dag.ops[static_cast<std::size_t>(op)];
      // An unlisted recompute shares the clock of the backward that follows it (Merak runs both in one
      // BackwardPass); that step is consumed by the backward itself.
      const bool borrowed = o.instruction == Instruction::kRecompute && !lists_recompute;
      const PlanStep& st = steps[k];
      if (!borrowed) ++k;
      const Instruction want = borrowed ? Instruction::kBackward : o.instruction;
      if (st.instruction && *st.instruction != want)
        throw PipelineError(fmt::format("{}: {} where the DAG's order runs the {}", st.where,
                                        instruction_name(*st.instruction), op_name(o)));
      if (st.microbatch && *st.microbatch != o.microbatch)
        throw PipelineError(fmt::format("{}: microbatch {} where the DAG's order runs the {}", st.where, *st.microbatch,
                                        op_name(o)));
      if (st.chunk && *st.chunk != o.chunk)
        throw PipelineError(fmt::format("{}: chunk {} where the DAG's order runs the {}", st.where, *st.chunk, op_name(o)));
      const auto& model = models.at(o.rank, o.instruction);
      const std::string what = fmt::format("{} ({} on stage {})", st.where, op_name(o), o.rank);
      if (st.duration_s && !borrowed) {
        const double q = *st.duration_s / u;
        const long dq = std::lround(q);
        if (!std::isfinite(q) || std::abs(q - static_cast<double>(dq)) > 1e-6 || dq < model.q_min() ||
            dq > model.q_max())
          throw PipelineError(fmt::format("{}: duration {} s is not a whole number of {} s units within the cost "
                                          "model's {}..{}",
                                          what, *st.duration_s, u, model.q_min(), model.q_max()));
        d[static_cast<std::size_t>(op)] = static_cast<int>(dq);
        e[static_cast<std::size_t>(op)] = model.cost(static_cast<int>(dq));
      } else {
        if (st.clock_mhz <= 0)
          throw PipelineError(fmt::format("{}: no SM clock (MHz) and no duration", what));
        auto g = ix.find({o.rank, o.instruction});
        if (g == ix.end()) throw PipelineError(fmt::format("{}: the profile has no rows for it", what));
        auto row = g->second.find(st.clock_mhz);
        if (row == g->second.end())
          throw PipelineError(fmt::format("{}: {} MHz is not a profiled clock of stage {} {} ({})", what, st.clock_mhz,
                                          o.rank, instruction_name(o.instruction),
                                          nearest_clocks(g->second, st.clock_mhz)));
        const KeptOption opt = grid_option(*row->second, models.params, what);
        d[static_cast<std::size_t>(op)] = opt.q;
        e[static_cast<std::size_t>(op)] = opt.e_eff_j;
      }
      if (st.clock_mhz > 0) {
        use.clock_min_mhz = use.clock_min_mhz ? std::min(use.clock_min_mhz, st.clock_mhz) : st.clock_mhz;
        use.clock_max_mhz = std::max(use.clock_max_mhz, st.clock_mhz);
      }
      use.busy_s += d[static_cast<std::size_t>(op)] * u;
      use.energy_j += e[static_cast<std::size_t>(op)];
    }
  }
  // The longest path through the planner's own critical-path code (frontier.hpp's makespan).
  FrontierInput in;
  in.num_ops = static_cast<int>(dag.ops.size());
  in.edges = dag.edges;
  ev.T = makespan(in, d);
  ev.op_time_s.reserve(d.size());
  for (int x : d) ev.op_time_s.push_back(x * u);
  ev.iteration_time_s = ev.T * u;
  for (double x : e) ev.compute_j += x;
  ev.blocking_j = dag.stages * static_cast<double>(ev.T) * u * P;
  ev.energy_j = ev.compute_j + ev.blocking_j;
  for (auto& use : ev.ranks) {
    use.idle_s = ev.iteration_time_s - use.busy_s;
    use.energy_j += ev.iteration_time_s * P;
  }
  return ev;
}

}  // namespace gearshift::pipeline
