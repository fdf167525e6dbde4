// Time the compute-only graph leaves out (issue 47 item 2): the planner's DAG (dag.hpp) has forward/backward
// computations and zero-lag edges only, while a measured iteration also spends time in sends/receives, microbatch
// loads, the optimizer step and syncs. Two constants stand for it:
//  * lag L [s]: added on each cross-stage edge of the DAG (a send/receive between neighbouring ranks);
//  * overhead O [s]: added once to the iteration (optimizer step, syncs).
// Predicted iteration = longest path of the DAG with L on its cross-stage edges + O. The added time is time the
// GPUs wait, so it is priced at the blocking power P [W]: S·(added time)·P [J].
//
// Fitted from ONE measured all-max-clock iteration (measured_run.hpp): its measured per-microbatch forward, load and
// backward times put on the DAG (load counted into the forward it precedes, as it runs right before it on that rank)
// give the longest path T0(L); then O = T_measured − T0(L). The file gives one iteration time per rank, and those
// are all the same iteration (they differ by ms), so it fixes ONE number, n·L + O, where n is the count of
// cross-stage edges on the longest path (the same for every all-max plan: docs/pipeline.md). L and O are therefore
// not both identifiable from it: L is taken as given (default 0, i.e. absent) and O is fitted.
#pragma once

#include <string>
#include <vector>

#include "pipeline/dag.hpp"
#include "pipeline/evaluate.hpp"
#include "pipeline/measured_run.hpp"

namespace gearshift::pipeline {

struct LeftOutTime {
  std::string source;               // the measured run it was fitted from
  double lag_s = 0;                 // L per cross-stage edge [s] (given, not fitted)
  double overhead_s = 0;            // O per iteration [s] (fitted)
  double measured_iteration_s = 0;  // T_measured [s], MEASURED (mean over ranks, first iteration dropped)
  double graph_s = 0;               // T0(L) [s]: the DAG's longest path at the run's measured times and lag L
  int crossings = 0;                // cross-stage edges on that longest path
};

// Longest path [s] of `dag` with op durations `op_time_s` [s] and `lag_s` added on each edge between two ranks;
// `crossings` (if given) receives the count of such edges on the longest path.
double longest_path_s(const PipelineDag& dag, const std::vector<double>& op_time_s, double lag_s,
                      int* crossings = nullptr);

// The run's measured times per DAG op [s]: forward + the load before it, backward; a recompute op gets 0 (Merak's
// measured backward includes its recompute). Throws PipelineError (naming the file) when the run's rank or
// microbatch count differs from the DAG's or the DAG is not a one-chunk pipeline.
std::vector<double> measured_op_times(const PipelineDag& dag, const MeasuredRun& run);

// Fits O with L = lag_s given (≥ 0). Throws PipelineError on a mismatch (above) or when the graph at lag L is
// already longer than the measured iteration (O would be negative: L is too large, or the run is not the plan's).
LeftOutTime fit_left_out_time(const PipelineDag& dag, const MeasuredRun& run, double lag_s);

// Adds the left-out time to a modelled evaluation (evaluate.hpp): iteration = longest path of its op times with L
// + O; the added time is idle on every rank at `blocking_power_w` [W]. Sets ev.left_out_s and ev.left_out_j.
void add_left_out_time(Evaluation& ev, const PipelineDag& dag, const LeftOutTime& lo, double blocking_power_w);

}  // namespace gearshift::pipeline
