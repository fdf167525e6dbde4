// The model file `gearshift calibrate` writes and `gearshift plan --model` / `run --auto --model` read
// (docs/calibrate.md has every field and unit): per kernel name its time coefficients a, b fitted from the
// job's own durations at a few locked (SM, memory) clock pairs (model/calibration_sweep.hpp), and the board's
// power parameters (activity scale, memory/uncore power) fitted to the GPU's measured average power at those
// pairs (NVML's energy counter). Used instead of the kernel-class priors' a, b and the spec's power figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu/spec.hpp"
#include "model/dvfs_model.hpp"
#include "model/workload.hpp"

namespace gearshift::sim {

struct PairMeasurement {
  model::ClockPair locked;        // the clocks locked, MHz
  double sampled_sm_mhz = 0;      // the SM clock NVML read during the window, MHz (below `locked` when capped)
  std::int64_t window_ns = 0;     // length of the measured window (whole energy-counter ticks); file: window_s
  std::size_t kernels = 0;        // kernels completed inside the window
  double steps = 0;               // window's kernels over the template's kernels per step
  double average_power_w = 0;     // measured: counter difference over the window, W
};

struct KernelFitEntry {
  std::string name;
  double sm_share = 0, mem_share = 0;  // a, b at the model's ref clocks, dimensionless
  double rms_relative_error = 0;       // of the time fit over the pairs
  std::size_t pairs = 0;               // pairs it was measured at
  // The time law a, b belong to (model/time_law.hpp). File: "law": "roofline" (a and b are then the SM and the
  // memory term at ref over t_ref, which overlap: each in (0, 1], the sum may exceed 1); absent: additive.
  model::TimeLaw law = model::TimeLaw::additive;
};

// The switch latency `gearshift calibrate` measured: from a clock-lock call's return until NVML's sampled SM clock
// showed the new clock (its clock reads 0.5 ms apart), ms, for lowerings and raisings apart.
struct SwitchLatency {
  std::vector<double> down_ms, up_ms;  // each measured switch, ms
  double median_down_ms() const;
  double median_up_ms() const;
  // What a plan made with this model takes as its L: the slower direction's median, ms (0 without samples).
  double plan_latency_ms() const;
};

struct CalibratedModel {
  std::string gpu;                     // spec name (gpu::find_spec)
  model::ClockPair ref;                // clocks a, b refer to (the spec's default pair), MHz
  double activity_scale = 1;           // s of PowerParams
  double memory_w_at_max = 0;          // W, memory/uncore power at full traffic and max memory clock
  double power_rms_relative_error = 0; // of the modelled against the measured average power over the pairs
  std::vector<KernelFitEntry> kernels;
  std::vector<PairMeasurement> pairs;
  std::string command;                 // the job calibrated (provenance)
  std::string created_utc;             // ISO 8601
  std::string pair_choice;             // how the pairs were chosen, plain words
  std::optional<SwitchLatency> switch_latency;  // measured (file field "switch_latency"); none in older files
};

// Writes the model file (JSON). Throws std::runtime_error when the file cannot be written.
void write_model_file(const CalibratedModel& m, const std::string& path);
// Reads one. Throws std::runtime_error naming the file and the field for an unreadable file, another format or
// version, a missing or non-finite field, a "law" other than "additive" or "roofline", a/b outside [0, 1] or
// a + b > 1 (additive), a or b outside (0, 1] (roofline).
CalibratedModel load_model_file(const std::string& path);

// The board's power parameters of `m` for `spec`: power_params_for(spec, memory_w_at_max) with its activity scale.
model::PowerParams model_power_params(const CalibratedModel& m, const gpu::GpuSpec& spec);

struct AppliedModel {
  std::size_t ops_matched = 0, kernel_ops = 0;  // kernel positions given the file's a, b; of all kernel positions
  // Kernel positions inside CUDA graphs (graph_id ≠ 0) left with their class priors: `gearshift calibrate` fits
  // kernels by name, and the launch feed names a graph launch ("cudaGraphLaunch graph=N"), not its kernels.
  std::size_t graph_ops_unmatched = 0;
};
// "fitted a, b for M of N kernel positions (class priors for the rest[; G of them run in CUDA graphs, ...])":
// the plan's Calibration line, so that the positions that fell back to the priors are counted, graph kernels apart.
std::string applied_model_summary(const AppliedModel& a);
// Gives every kernel position of `w` named in `m` the fitted a, b and law (converted from m.ref to the position's
// own reference clocks: the same law t(f, m) at a different reference) and sets `dm`'s power parameters to the
// file's; the other positions keep their class priors. Refreshes unsampled reference clocks. Throws
// std::invalid_argument when m.gpu is not dm's spec.
AppliedModel apply_model(const CalibratedModel& m, model::Workload& w, model::DvfsModel& dm);

struct PowerFit {
  double activity_scale = 1, memory_w_at_max = 0;
  double rms_relative_error = 0;  // modelled against measured average power over the pairs
  bool at_bound = false;          // the best fit lies on the search's bound (activity 0.05 or 5, memory 0 or board)
};
// The activity scale in [0.05, 5] and memory/uncore power in [0, max board power] whose simulated average power
// at each pair (every position at that pair) best matches the measured one (least squares on the relative
// error; a grid, then two finer grids around its best). `w`'s a, b are the fitted ones. Sets `dm`'s parameters
// to the fit. Throws std::invalid_argument for fewer than 2 pairs or a non-positive measured power.
PowerFit fit_board_power(model::Workload& w, model::DvfsModel& dm, const std::vector<PairMeasurement>& pairs);

// Why a calibrated model is not to be used (right or refused), empty when plausible: sim::implausible_calibration
// on its power parameters, a memory power above kMaxMemoryShareOfBoard of the board's, a power fit on fit_board_power's search bound, a power fit whose rms error exceeds
// 5 %, no kernel fitted. Checked where the file is written and again where it is read.
std::vector<std::string> implausible_model(const CalibratedModel& m, const gpu::GpuSpec& spec);

}  // namespace gearshift::sim
