// The main job shared by `gearshift plan` and `gearshift demo`: trace -> iterations -> workload -> model
// (calibrated to the trace's measured power when it has one) -> every strategy planned and simulated.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gpu/spec.hpp"
#include "model/dvfs_model.hpp"
#include "model/workload.hpp"
#include "plan/plan_file.hpp"
#include "sim/calibration_model.hpp"
#include "sim/evaluate.hpp"
#include "sim/measurement.hpp"
#include "service/cpu_side.hpp"
#include "service/plan_in_time.hpp"
#include "sim/power_attribution.hpp"
#include "sim/saving_range.hpp"
#include "sim/saving_parts.hpp"
#include "trace/iteration.hpp"
#include "trace/step_variants.hpp"
#include "trace/record.hpp"

namespace gearshift::service {

struct PlanJobOptions {
  std::string trace_path;
  std::string display_name;       // how to name the input in output (the path, or "embedded:...")
  std::optional<std::string> gpu; // --gpu: the spec to plan for; absent: the trace's GPU (choose_gpu)
  trace::IterationOptions steps;  // --device, --trust-period (docs/step-detection.md)
  double max_slowdown = 0.005;    // fraction
  plan::Strategy strategy = plan::Strategy::phase;  // written to plan.json
  std::optional<double> switch_latency_ns;  // for plan.json's phase plan, ns; default: the GPU spec's estimate
  bool calibrate = true;          // scale activity to the trace's measured average power when present
  // The measured average power to calibrate to instead of the trace's (run --auto: the NVML energy counter over
  // the untraced run); absent: the trace's, when it has one.
  std::optional<sim::MeasuredPower> measured_power;
  int range_samples = 200;        // draws for the chosen plan's error bars (sim/saving_range.hpp)
  // --model: a `gearshift calibrate` model file, used instead of the class priors' a, b (for the kernels it
  // names) and of the calibration to the trace's measured power; model_path names it in the output.
  std::optional<sim::CalibratedModel> model;
  std::string model_path;
  // Replay a phase plan on its own trace before it is taken, and take one with fewer, longer phases where its
  // changes do not land in time (service/plan_in_time.hpp). Off: the plan as the model chose it.
  bool check_in_time = true;
  // The step template as traced, where the `iterations` handed to plan_trace were re-timed (run --auto re-times
  // the template's idle time to the untraced step): the in-time check replays the trace, whose timing is the
  // traced one, against it. Used only when it has the re-timed template's ops.
  std::optional<trace::IterationTemplate> traced_template;
  // --kernels-only: plan from the trace's kernels alone (its copies and memsets left out at import), as `run
  // --auto` sees a job whose CUPTI refuses copy activity (its launch feed then carries kernels only; it carried
  // nothing else before session 25, docs/runtime.md).
  bool kernels_only = false;
  // The untraced measurement that supports the trace's CPU side as traced (service/cpu_side.hpp), when the caller
  // has one (run --auto: its untraced window); "": the trace's meta decides (its measured untraced step).
  std::string cpu_measured_by;
};

// Reads a model file for --model and refuses an implausible one (sim::implausible_model): ServiceError kBadInput for
// an unreadable or invalid file, ServiceError kModelRefused for an implausible one.
sim::CalibratedModel load_model_checked(const std::string& path);

// Which GPU spec plans a trace, and why: --gpu when given, else the spec of the GPU the trace names
// (Trace::gpu_name through gpu::spec_name_for_device), else h200 assumed.
struct GpuChoice {
  std::string spec;        // the spec planned with, e.g. "h200"
  std::string source;      // "--gpu", "trace" or "assumed" (the trace names no GPU)
  std::string trace_gpu;   // the device name the trace gives; "" when it names none
  std::string trace_spec;  // the spec trace_gpu maps to; "" when none
  std::string warning;     // set when --gpu names another spec than the trace's GPU maps to
  std::string line() const;        // the table's "GPU" line, plain words
  nlohmann::json to_json() const;  // {"spec", "source", "trace_gpu", "trace_spec"} (null when absent)
};

// Throws ServiceError(kBadArgument) for an unknown --gpu, or when no --gpu is given and the trace names a GPU without a spec;
// ServiceError(kBadInput) when the trace's measured average power exceeds the chosen spec's maximum power limit (by more
// than 5 %): the trace did not run on that GPU.
GpuChoice choose_gpu(const std::optional<std::string>& gpu, const trace::Trace& t, const std::string& display_name);

struct PlanJobResult {
  GpuChoice gpu;
  trace::Trace trace;
  trace::IterationAnalysis iterations;
  // Blocks some steps run and others do not (trace/step_variants.hpp): in plan.json for the runtime's predictor;
  // the model's step is the template's as it is.
  std::vector<trace::StepVariant> variants;
  model::Workload workload;
  std::optional<model::DvfsModel> model;
  std::optional<double> calibrated_to_w;  // measured average power the model was calibrated to, W
  std::string calibration_source;         // where that power comes from, or why uncalibrated (plain words)
  std::string gemm_clock_source;          // non-empty: GEMMs' cap clock from the trace's clock samples (words)
  // Where the model's calibration or baseline disagrees with a measurement (sim/measurement.hpp): each also
  // in `warnings`; any of them marks the predicted figures low-confidence (JSON and plan.json).
  std::vector<std::string> model_warnings;
  sim::Evaluation evaluation;
  const sim::StrategyResult* chosen = nullptr;  // the plan for plan.json
  // Where the calibration put more in memory/uncore power than memory can draw (sim/power_attribution.hpp): that
  // surplus read as SM activity instead (`reached` false: that reading cannot reproduce the measured power), and in
  // words (also in `warnings`). `planned_in_activity_reading`: the memory reading was impossible
  // (sim::implausible_calibration), the plan was made in this one; else the plan is the memory reading's and
  // `chosen_in_activity_reading` is it simulated in this one.
  std::optional<sim::SurplusAsActivity> activity_reading;
  bool planned_in_activity_reading = false;
  std::optional<sim::PlanUnderReading> chosen_in_activity_reading;
  std::string activity_reading_note;
  // The chosen plan's error bars: its saving and step time under draws of the class priors' spread.
  sim::SavingRange range;
  // What the chosen plan's saving rests on: busy kernels' clocks, waits by kind, idle power (sim/saving_parts.hpp).
  sim::SavingParts saving_parts;
  // The in-time check's rungs (service/plan_in_time.hpp); `chosen` is its taken rung's plan when it ran.
  InTimeCheck in_time;
  // Everything a user must read before trusting the figures (trace health, step evidence, GPU identity), plain
  // words; printed as "Warning" lines, in the JSON report's "warnings" and in plan.json's provenance.
  std::vector<std::string> warnings;
  std::size_t left_out_ops = 0;  // copies and memsets left out by PlanJobOptions::kernels_only
  // Whether the replay takes the CPU side as traced or GPU-bound, and why (service/cpu_side.hpp).
  CpuSide cpu;
};

// Throws ServiceError (service/error.hpp): kBadArgument, kBadInput, kNoIteration, kModelRefused.
PlanJobResult run_plan_job(const PlanJobOptions& o);
// The same planning on a trace already in memory (`gearshift run --auto` collects it from the launch feed);
// o.trace_path is not read. run_plan_job imports the file and calls this.
// `iterations`: the trace's iteration analysis when the caller already ran it (run --auto), else it is run here.
PlanJobResult plan_trace(const PlanJobOptions& o, trace::Trace trace,
                         std::optional<trace::IterationAnalysis> iterations = std::nullopt);

nlohmann::json report_json(const PlanJobOptions& o, const PlanJobResult& r);
// The chosen plan as plan.json (plan/plan_file.hpp, the one owner of the format); plan_file_json is its JSON.
plan::PlanFile plan_file(const PlanJobOptions& o, const PlanJobResult& r);
nlohmann::json plan_file_json(const PlanJobOptions& o, const PlanJobResult& r);

// gpu::find_spec(name), or ServiceError(kBadArgument) naming the known specs (--gpu). service/plan_inputs.cpp.
gpu::GpuSpec spec_or_exit(const std::string& name);

// The GPU specs a trace can be planned for (gpu::spec_names: data/gpus/*.json).
std::vector<std::string> spec_names();

// Parses "0.5%", "0.5 %" or "0.005" into a fraction; throws ServiceError(kBadArgument) when not a number in [0, 1].
double parse_slowdown(const std::string& text);
// "--max-slowdown 0.5 is read as 50 % of step time (a fraction without %); did you mean 0.5%?" for a value given
// without % that parse_slowdown reads as over 10 % (0.5 is 50 %, a likely slip for 0.5 %); "" otherwise.
std::string slowdown_echo(const std::string& text);

}  // namespace gearshift::service
