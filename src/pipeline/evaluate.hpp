// One given clock schedule of a pipeline, evaluated on the planner's own instruction DAG (dag.hpp) and cost model
// (cost_model.hpp): the MODELLED iteration time, energy and per-rank busy/idle time. Nothing is measured here.
//
// Each instruction of the schedule gets an integer duration d [units of u] and an energy e [J]:
//  * given as a duration (gearshift's schedules.json, `duration_s`): d = duration/u and e = f(d), the planner's cost
//    model at that duration — so evaluating the planner's own plans gives the planner's own figures;
//  * given as one SM clock c [MHz] (lowtime, Perseus): d = q_c = floor(time_c/u) and e = e_eff,c, what the profile
//    measured at that clock on the planner's grid (grid_option). The clock must be one the profile lists for that
//    (stage, instruction): another is refused, naming the nearest profiled clocks (no snapping, so that a plan made
//    for other clocks is not silently priced at different ones).
// Then, as in the frontier (frontier.hpp): T = the DAG's longest path [units] and
//   E = Σ_i e_i + S·T·u·P   [J]     (P = blocking power per GPU [W], S ranks)
// and per rank r: busy_r = Σ_{i on r} d_i·u [s], idle_r = T·u − busy_r [s], E_r = Σ_{i on r} e_i + T·u·P [J].
// An activation recompute in the DAG that the schedule does not list runs at the clock of the backward after it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/cost_model.hpp"
#include "pipeline/dag.hpp"
#include "pipeline/profile.hpp"

namespace gearshift::pipeline {

// One computation of a rank's schedule, as a plan file gives it. Absent fields are not checked against the DAG.
struct PlanStep {
  std::optional<Instruction> instruction;
  std::optional<int> microbatch;
  std::optional<int> chunk;
  int clock_mhz = 0;                 // SM clock [MHz]; 0 when the step gives only a duration
  std::optional<double> duration_s;  // the planner's duration [s] (gearshift schedules.json)
  std::string where;                 // e.g. "rank 2 power_states[17]", for messages
};

struct ClockSchedule {
  std::string name;                          // "slowdown_1pct", "plan", …
  std::string source;                        // the plan file, for messages
  std::vector<std::vector<PlanStep>> ranks;  // [rank] -> computations in execution order
};

struct RankUse {
  double busy_s = 0;    // computing [s]
  double idle_s = 0;    // waiting within the iteration [s]
  double energy_j = 0;  // this rank's GPU over the iteration [J] (modelled)
  int clock_min_mhz = 0, clock_max_mhz = 0;  // range of the clocks its steps name (0 when none)
};

struct Evaluation {
  std::string name;
  int T = 0;                      // makespan [units]
  double iteration_time_s = 0;    // T·u [s]
  double compute_j = 0;           // Σ e_i [J] (effective energies: blocking power taken out)
  double blocking_j = 0;          // S·T·u·P [J]
  double energy_j = 0;            // compute_j + blocking_j [J]
  std::vector<RankUse> ranks;
  std::vector<double> op_time_s;  // [DAG op] d·u [s]
  double left_out_s = 0;          // time added for what the graph leaves out [s] (left_out_time.hpp; 0 without)
  double left_out_j = 0;          // its energy at the blocking power [J], included in blocking_j and energy_j
};

// Throws PipelineError (one line naming the step) on: a rank count other than the DAG's, a rank whose number of
// computations differs from the DAG's, an instruction or microbatch out of the DAG's order, a clock the profile
// does not list for that (stage, instruction), a duration off the grid or outside the cost model's range.
Evaluation evaluate_schedule(const PipelineDag& dag, const StageModels& models, const Profile& profile,
                             const ClockSchedule& schedule);

}  // namespace gearshift::pipeline
