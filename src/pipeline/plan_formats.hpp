// Reading a pipeline clock plan for `gearshift pipeline --evaluate`: three formats, told apart by content.
//  * gearshift's own `schedules.json` (report.hpp's schedules_json): {"plans": [{"name", "ranks": [{"rank",
//    "instructions": [{"instruction", "microbatch", "chunk", "duration_s", "sm_clock_mhz", "split"?}]}]}], "stages",
//    "microbatches", "schedule", "virtual_stages", "time_unit_s", "blocking_power_w", "cost_model", …}. Every plan
//    in it is read; durations [s] are what is evaluated (the clocks are checked against the profile).
//  * lowtime's per-iteration frequency file `freqs_pipeline_NNNNN.py` (lowtime's Perseus example): a Python list
//    literal, one list per stage of `('forward'|'backward', MHz)` tuples in the stage's synchronous-1F1B order,
//    then `# Iteration …` comment lines. Bare MHz integers instead of tuples (the form some Perseus tools write)
//    are read too, in the DAG's order.
//  * Perseus `sched.json` (`[{"rank": r, "power_states": [MHz, …]}]`): one SM clock per Merak pipe instruction of
//    that rank; the forward and backward computations are placed by Merak's 1F1B order (merak_order.hpp), which
//    also gives the microbatch count from rank 0's length and checks every rank's length.
// Anything else, an empty file, a non-number clock, an unknown or repeated rank, or a length that fits no
// microbatch count: PipelineError, one line naming the file and the place.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/evaluate.hpp"

namespace gearshift::pipeline {

enum class PlanFormat { kGearshiftSchedules, kLowtimeFreqs, kPerseusSched };
const char* plan_format_name(PlanFormat f);  // "gearshift schedules.json", "lowtime freqs", "Perseus sched.json"

struct PlanFile {
  PlanFormat format = PlanFormat::kGearshiftSchedules;
  int stages = 0;                       // ranks
  std::optional<int> microbatches;      // known from the file (gearshift; Perseus from Merak's order; lowtime tuples)
  std::optional<std::string> schedule;  // gearshift: its "schedule"; lowtime and Perseus are synchronous 1F1B
  std::optional<int> virtual_stages;
  std::optional<double> time_unit_s;       // gearshift: the planner's u [s]
  std::optional<double> blocking_power_w;  // gearshift: the planner's P [W]
  std::optional<std::string> cost_model;   // gearshift: "hull" or "exp-fit"
  std::vector<ClockSchedule> plans;
};

// `source` names the file in messages.
PlanFile parse_plan_file(const std::string& text, const std::string& source);

}  // namespace gearshift::pipeline
