#include "pipeline/left_out_time.hpp"

#include <cmath>

#include <fmt/core.h>

#include "pipeline/error.hpp"

namespace gearshift::pipeline {

double longest_path_s(const PipelineDag& dag, const std::vector<double>& t, double lag_s, int* crossings) {
  const std::size_t n = dag.ops.size();
  if (t.size() != n) throw PipelineError(fmt::format("longest path: {} op times for {} ops", t.size(), n));
  std::vector<std::vector<int>> out(n);
  std::vector<int> indeg(n, 0);
  for (const auto& [u, v] : dag.edges) {
    out[static_cast<std::size_t>(u)].push_back(v);
    ++indeg[static_cast<std::size_t>(v)];
  }
  std::vector<double> start(n, 0.0);
  std::vector<int> cross(n, 0);  // crossings on the longest path ending at the op's start
  std::vector<int> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (!indeg[i]) ready.push_back(static_cast<int>(i));
  double best = 0;
  int best_cross = 0;
  std::size_t seen = 0;
  while (!ready.empty()) {
    const auto u = static_cast<std::size_t>(ready.back());
    ready.pop_back();
    ++seen;
    const double fin = start[u] + t[u];
    if (fin > best) best = fin, best_cross = cross[u];
    for (int v : out[u]) {
      const auto w = static_cast<std::size_t>(v);
      const bool hop = dag.ops[u].rank != dag.ops[w].rank;
      const double s = fin + (hop ? lag_s : 0.0);
      if (s > start[w]) start[w] = s, cross[w] = cross[u] + (hop ? 1 : 0);
      if (--indeg[w] == 0) ready.push_back(v);
    }
  }
  if (seen != n) throw PipelineError("longest path: the DAG has a cycle");
  if (crossings) *crossings = best_cross;
  return best;
}

std::vector<double> measured_op_times(const PipelineDag& dag, const MeasuredRun& run) {
  if (dag.chunks != 1)
    throw PipelineError(fmt::format("{}: a measured run is placed on a one-chunk pipeline; this one has {} chunks",
                                    run.source, dag.chunks));
  if (static_cast<int>(run.ranks.size()) != dag.stages)
    throw PipelineError(fmt::format("{}: {} ranks measured; the pipeline has {} stages", run.source, run.ranks.size(),
                                    dag.stages));
  if (run.microbatches != dag.microbatches)
    throw PipelineError(fmt::format("{}: {} microbatches measured per iteration; the pipeline has {}", run.source,
                                    run.microbatches, dag.microbatches));
  std::vector<double> t(dag.ops.size(), 0.0);
  for (std::size_t i = 0; i < dag.ops.size(); ++i) {
    const DagOp& o = dag.ops[i];
    const MeasuredRank& r = run.ranks[static_cast<std::size_t>(o.rank)];
    const auto m = static_cast<std::size_t>(o.microbatch);
    if (o.instruction == Instruction::kForward) t[i] = r.forward_s[m] + r.load_s[m];
    else if (o.instruction == Instruction::kBackward) t[i] = r.backward_s[m];
  }
  return t;
}

LeftOutTime fit_left_out_time(const PipelineDag& dag, const MeasuredRun& run, double lag_s) {
  if (!(lag_s >= 0) || !std::isfinite(lag_s)) throw PipelineError("the send/receive lag must be ≥ 0 s");
  LeftOutTime lo;
  lo.source = run.source;
  lo.lag_s = lag_s;
  lo.measured_iteration_s = run.iteration_s();
  lo.graph_s = longest_path_s(dag, measured_op_times(dag, run), lag_s, &lo.crossings);
  lo.overhead_s = lo.measured_iteration_s - lo.graph_s;
  if (lo.overhead_s < 0)
    throw PipelineError(fmt::format("{}: the graph at the run's measured times and a lag of {} ms is {:.4f} s, longer "
                                    "than the measured iteration {:.4f} s (a smaller lag, or the run of another plan?)",
                                    run.source, lag_s * 1e3, lo.graph_s, lo.measured_iteration_s));
  return lo;
}

void add_left_out_time(Evaluation& ev, const PipelineDag& dag, const LeftOutTime& lo, double P) {
  const double T = longest_path_s(dag, ev.op_time_s, lo.lag_s) + lo.overhead_s;
  const double added = T - ev.iteration_time_s;
  ev.iteration_time_s = T;
  ev.left_out_s = added;
  ev.left_out_j = dag.stages * added * P;
  ev.blocking_j += ev.left_out_j;
  ev.energy_j += ev.left_out_j;
  for (auto& r : ev.ranks) {
    r.idle_s += added;
    r.energy_j += added * P;
  }
}

}  // namespace gearshift::pipeline
