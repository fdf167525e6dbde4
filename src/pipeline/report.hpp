// Outputs of the pipeline planner: frontier CSV, per-rank clock schedules (JSON) and the summary.
// Every energy here is modelled from the profile (not measured).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/planner.hpp"

namespace gearshift::pipeline {

// `time,energy` rows [s, J] of every solver step T_max−1 … T_min (the Perseus reference layout; the slow-end rows
// above the energy minimum are dominated). pareto_only keeps only the Pareto-optimal rows, T_max included.
std::string frontier_csv(const Frontier& f, bool pareto_only);

struct SummaryRow {
  std::string name;            // "no_slowdown", "slowdown_1pct", "straggler"
  double deadline_s = 0;       // iteration deadline D [s]
  double plan_time_s = 0;      // makespan of the chosen plan [s] (≤ D)
  double energy_j = 0;         // plan energy up to D [J]
  double baseline_j = 0;       // all-fastest energy up to D [J]
  double saving = 0;           // 1 − energy/baseline
  double rounding_extra_j = 0; // extra energy if every instruction runs at one clock instead of a split [J]
  std::size_t point = 0;       // frontier point index
};

struct Summary {
  std::vector<SummaryRow> rows;
  double t_min_s = 0, t_max_s = 0;
  double min_energy_time_s = 0, min_energy_j = 0;
  std::size_t steps = 0, pareto_points = 0;
  int dropped_dominated = 0, dropped_same_q = 0;
  double solve_seconds = 0;  // wall time of the solver (measured, not modelled)
};

// Rows: T_min (no slowdown), 1.01·T_min, straggler·T_min and, when deadline_s > 0, that deadline [s].
// Throws PipelineError when deadline_s is below T_min.
Summary summarise(const PipelinePlan& plan, double straggler, double deadline_s = 0);
std::string summary_text(const PipelinePlan& plan, const Summary& s);
nlohmann::json summary_json(const PipelinePlan& plan, const Summary& s);

// Per-rank clock schedules (instructions in execution order) for each summary row.
nlohmann::json schedules_json(const PipelinePlan& plan, const Summary& s);

}  // namespace gearshift::pipeline
