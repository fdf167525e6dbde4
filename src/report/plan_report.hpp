// `gearshift plan --report plan.html`: one self-contained HTML page (opens offline: Chart.js, the styles and the
// figures are inline, nothing is fetched) with the step's timeline and the chosen plan's clock track, energy per
// kernel class baseline vs plan, the savings frontier, saving vs switch latency L, the evidence and warnings, and
// the input's provenance. docs/report.md describes what each figure shows.
//
// The report reads results that are already computed (cli::plan_trace: the evaluation, the chosen plan); it
// plans nothing. Only the chosen plan and the baseline are simulated once more to keep their per-kernel timeline
// (sim::simulate with keep_timeline; the evaluation keeps none), which splits their energy by kernel class.
// Every figure is labelled modelled (DVFS model + simulator) or measured (the trace).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "sim/evaluate.hpp"
#include "sim/saving_parts.hpp"
#include "sim/saving_range.hpp"
#include "trace/iteration.hpp"
#include "trace/record.hpp"

namespace gearshift::report {

// The report cannot be written: Chart.js not found, the file not writable. what() is one line saying what to do.
class ReportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Everything the report shows; the references must outlive the call.
struct PlanReportInput {
  const trace::Trace& trace;
  const trace::IterationAnalysis& iterations;
  const model::Workload& workload;
  const model::DvfsModel& model;  // the model the evaluation used (calibrated)
  const sim::Evaluation& evaluation;
  const sim::StrategyResult& chosen;  // the plan written to plan.json
  std::string input;                  // how to name the input (path or "embedded:...")
  std::string command_line;           // the command that made the report
  std::string created_utc;            // ISO 8601, e.g. 2026-12-01T15:00:00Z
  double max_slowdown = 0;            // the budget, fraction
  std::string gpu_line;               // which GPU spec and why, plain words
  std::string calibration;            // how the model was calibrated (or why not), plain words
  std::vector<std::string> model_warnings;  // where the model disagrees with a measurement (low confidence)
  std::vector<std::string> warnings;        // everything a user must read before trusting the figures
  const sim::SavingRange* range;            // the chosen plan's error bars (sim/saving_range.hpp); null: none
  const sim::SavingParts* parts = nullptr;  // what the chosen plan's saving rests on (sim/saving_parts.hpp); null: none
};

// The figures the page draws, as JSON (docs/report.md lists the keys). Times in µs from the step's start,
// energies in J per step, clocks in MHz.
nlohmann::json plan_report_data(const PlanReportInput& in);

// The whole page, with `chartjs` (the Chart.js UMD build's source) inlined.
std::string plan_report_html(const PlanReportInput& in, const std::string& chartjs);

// Chart.js as the report inlines it: $GEARSHIFT_CHARTJS when set, else the first of the standard paths that exists
// (Debian's libjs-chart.js: /usr/share/javascript/chart.js/chart.min.js, set at build time by the CMake option
// GEARSHIFT_CHARTJS_PATH, then chart.umd.js / chart.js beside it). Throws ReportError naming the paths tried and
// how to install it when none is readable, or when the file is not a Chart.js UMD build.
std::string load_chartjs();

// plan_report_html with load_chartjs(), written to `path`. Throws ReportError; std::logic_error (a bug) when
// the chosen plan or the baseline does not simulate to the evaluation's energy.
void write_plan_report(const PlanReportInput& in, const std::string& path);

}  // namespace gearshift::report
