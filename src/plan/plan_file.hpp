// plan.json: the one definition of the plan file format (docs/plan-format.md). Every writer (`gearshift plan -o`,
// `plan-ranks -o`, `run --auto --plan-output`, the Python package) builds a PlanFile and writes it with to_json /
// write_plan_file; every reader (`run --plan`, `replay --plan`, the Python runtime) reads it with read_plan_file,
// which validates it against its GPU's spec. Units are those of the file: µs, MHz, s, J, W.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/dvfs_model.hpp"
#include "trace/record.hpp"

namespace gearshift::plan {

inline constexpr const char* kPlanFormat = "gearshift-plan";  // the file's "format" tag
inline constexpr int kPlanFileVersion = 1;                    // the newest "version" this build reads and writes

// A plan file that cannot be read or is not a valid plan: missing, a directory, empty, not JSON, another format,
// a newer version, a missing or mistyped field, clocks its GPU cannot set, ranges out of order. The message names
// the file and the field (e.g. "plan.json: positions[3]: 'sm_clock_mhz' is "fast", not a number (MHz)").
class PlanFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One template position: the op the job runs there and the clocks wanted while it runs.
struct PlanFilePosition {
  std::string name;                          // kernel (or memcpy/memset) name as traced
  trace::OpKind kind = trace::OpKind::kernel;  // "kind": kernel, memcpy or memset (required)
  std::optional<std::int32_t> stream;        // CUDA stream it ran on
  std::string cls;                           // "class": kernel class (model::to_string), "" when absent
  std::string pass;                          // "pass": forward, backward or optimizer, "" when absent
  double duration_us = 0;                    // mean GPU duration at the traced clocks, µs (>= 0)
  double start_offset_us = 0;                // mean GPU start relative to the step's start, µs
  model::ClockPair clocks;                   // "sm_clock_mhz", "mem_clock_mhz": wanted clocks, MHz
  // "graph", "graph_launch": the CUDA graph it ran in and which graph launch of the step (0, 1, ...); absent for
  // ops launched on their own. The positions of one launch are one unit for the runtime: same clocks.
  std::uint32_t graph_id = 0;
  std::int64_t graph_launch = -1;
  // "launch_offset_us": CPU time of its launch call in one traced step (the template's reference step) relative
  // to that step's start, µs; absent when the trace did not record it. Ops of several streams start on the GPU
  // in another order than the CPU launched them; the runtime's predictor follows launches in this order
  // (runtime/runtime_core.hpp).
  std::optional<double> launch_offset_us = std::nullopt;
};

// A contiguous run of positions with one clock pair (what phases_of gives for the schedule).
struct PlanFilePhase {
  std::size_t first_position = 0, last_position = 0;  // inclusive, into positions
  std::string first_op;                               // positions[first_position].name
  model::ClockPair clocks;                            // MHz
};

// A block of ops that some of the traced steps ran and others did not (trace/step_variants.hpp), so that the
// runtime's predictor follows it instead of losing lock: "variants" in plan.json (additive: absent = none).
// `ops` run after position `after` (-1: before the first) in place of positions after+1 .. after+skip: an
// insertion (skip 0), a skip (no ops) or an alternative (both; readers before session 18 refuse it). Inserted
// ops run at the clocks of the position they follow (the plan's model does not include them).
struct PlanFileVariant {
  std::int64_t after = -1;
  std::vector<std::pair<std::string, trace::OpKind>> ops;  // ops run there (name, kind) in launch order
  std::size_t skip = 0;                                   // positions left out; 0 for an insertion
  std::size_t steps = 0;                                  // steps of the trace that ran it
};

// Predicted figures per step (modelled: DVFS model + simulator). Absent figures are not written.
struct PlanFilePredicted {
  bool low_confidence = false;  // the model disagreed with a measurement (plan's "Warning" lines)
  std::optional<double> time_s, energy_j, saving_pct, slowdown_pct, baseline_time_s, baseline_energy_j;
  std::optional<std::size_t> clock_changes_per_step;
  // Error bars (sim/saving_range.hpp): the low/high quantiles of the saving (%) and step time (s) under draws of
  // the class priors' spread, and the share of draws whose slowdown exceeds max_slowdown (0..1). Additive
  // fields: absent in plans written before them, and read as absent.
  std::optional<double> saving_low_pct, saving_high_pct, time_low_s, time_high_s, p_over_budget;
  std::optional<std::size_t> range_samples;
};

// The DVFS model's parameters the plan was made with (model/dvfs_model.hpp), W and MHz.
struct PlanFileModel {
  std::string formula, coefficients;
  double idle_w_at_min_clock = 0, idle_w_at_max_clock = 0, v_min_ratio = 0, dynamic_w_at_max = 0,
         memory_w_at_max = 0, power_cap_w = 0, activity_scale = 1;
  int knee_mhz = 0;
  std::optional<double> calibrated_to_power_w;  // measured average power the model was calibrated to, W
};

// The model section for a model's parameters (formula and coefficients text included).
PlanFileModel model_section(const model::PowerParams& p, std::optional<double> calibrated_to_power_w);

// Which GPU spec the plan was made for, and why (cli::GpuChoice).
struct PlanFileGpuSelection {
  std::string spec, source;           // source: "--gpu", "trace" or "assumed"
  std::string trace_gpu, trace_spec;  // "" is written as null
};

// Where the plan comes from.
struct PlanFileProvenance {
  std::string input;                  // the trace (path, "embedded:...", or the --auto launch feed)
  std::string format;                 // the trace's format ("chrome-trace", "gearshift-trace", ...)
  nlohmann::json trace_meta;          // the trace's own metadata, null when none
  std::optional<std::size_t> iterations;
  std::string iteration_method;
  std::optional<double> step_confidence;  // 0..1
  std::optional<int> device;
  std::vector<std::string> warnings;      // what a user must read before trusting the figures
  std::vector<std::string> step_evidence; // the step detector's evidence lines (docs/step-detection.md)
  std::string created;                    // UTC, ISO 8601
  std::string gearshift_version;
};

struct PlanFile {
  int version = kPlanFileVersion;
  std::string gpu;                                 // GPU spec name, e.g. "h200" (gpu::find_spec)
  std::optional<PlanFileGpuSelection> gpu_selection;
  std::string strategy;                            // "phase", "kernel-global", "sync-slack phase", ...
  double switch_latency_us = 0;                    // L the plan was made for, µs (>= 0)
  std::optional<double> max_slowdown;              // step-time budget, fraction (0.005 = 0.5 %)
  double period_us = 0;                            // step time (start to next start), µs (> 0)
  std::vector<PlanFilePosition> positions;         // template order (not empty)
  std::vector<PlanFilePhase> phases;               // may be empty
  std::vector<PlanFileVariant> variants;           // may be empty
  std::optional<PlanFilePredicted> predicted;
  std::optional<PlanFileModel> model;
  std::optional<PlanFileProvenance> provenance;
  // plan-ranks (sync-aware slack) only.
  std::optional<int> rank;
  std::optional<double> deadline_s, straggler_factor;

  // phases computed from the positions' clocks: maximal runs of equal clock pairs.
  std::vector<PlanFilePhase> phases_from_positions() const;
};

nlohmann::json to_json(const PlanFile& p);
// Validates (as read_plan_file does) and writes to `path` through a temporary file beside it, renamed over
// `path` when complete: an existing file is never left half-written. Throws PlanFileError when the plan is invalid
// or `path` cannot be written (naming it and why).
void write_plan_file(const PlanFile& p, const std::string& path);

// Parses and validates; `source` names the file in messages. Throws PlanFileError.
PlanFile plan_file_from_json(const nlohmann::json& j, const std::string& source);
// Reads and validates the file at `path`. Throws PlanFileError.
PlanFile read_plan_file(const std::string& path);
// The checks on a plan in memory (made here, or parsed): a known GPU spec, clocks it can set, period > 0,
// switch latency >= 0, positions present, phases in order, in range, not overlapping and at their positions'
// clocks, variants inside the positions, each inserting or skipping ops (or both). Throws PlanFileError naming
// `source` and the field.
void validate(const PlanFile& p, const std::string& source);

// How far two templates are the same job's: the share of the longer one's positions (name and kind) that align in
// order with the other's (longest common subsequence), 0..1. Replay refuses a plan made for another job with it.
double position_match_share(const std::vector<std::pair<std::string, trace::OpKind>>& a,
                            const std::vector<std::pair<std::string, trace::OpKind>>& b);

}  // namespace gearshift::plan
