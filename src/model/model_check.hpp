// `gearshift validate-model`: the per-kernel DVFS model checked against a user's measured sweeps (any number of
// files, any board with a shipped spec or a stated power limit). The same evaluation as bench/kernel_validation
// (validate_kernels: 3-clock fits, board V-curve, idle line and time shape cross-fitted on the other fold of
// kernels), reported per kernel and pooled, with the naive baselines and the clock each would pick.
//
// Files: the open sweep CSV (model/sweep_csv.hpp, docs/sweep-format.md) and the public formats of
// model/kernel_sweeps.hpp, told apart by content: a JSON object is a Kernel Tuner cache; a header with
// `kernel-name` a SYnergy CSV; a header with `benchmark` and `average_power` an NV-DVFS-Benchmark profile (its
// GPU from ModelCheckOptions::board or the file name's prefix before "-dvfs", e.g. "v100-dvfs-real-profile.csv");
// anything else the open format. Public files get the README's caveats (drop_unreached_clocks) and their suite
// from the file name (SYnergy `merged_*`, NV-DVFS `*microbenchmark*`: micro), as read_kernel_sweeps does.
//
// Board: the shipped spec of its name (gpu::find_spec), its power limit replaced where one is stated; else, with
// a power limit, stand_in_spec; a public dataset's GPU without either gets the bench's board (validation_spec).
// Power limit precedence: the file's `# power_limit_w:`, then ModelCheckOptions::power_limit_w, then the spec.
//
// Every figure is labelled: the sweeps are MEASURED; the fits' predictions are MODELLED.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "gpu/spec.hpp"
#include "model/fit_validation.hpp"
#include "model/kernel_sweeps.hpp"

namespace gearshift::model {

struct ModelCheckOptions {
  std::string board;         // for files that name none
  double power_limit_w = 0;  // W; 0: not stated here
};

// What is checked, after reading: kernels with ≥ 4 SM clocks at a memory clock (3 calibration clocks spanning the
// range, 3 top clocks ≥ 100 MHz apart: kernel_splits), the board model of each GPU, and the notes of what was
// skipped or ignored (file and line where known).
struct CheckInput {
  std::vector<std::string> files;
  std::vector<std::string> formats;  // parallel to files: "open CSV", "SYnergy CSV", "NV-DVFS profile CSV", "Kernel Tuner cache"
  std::vector<KernelSweep> kernels;
  std::map<std::string, gpu::GpuSpec> boards;  // by KernelSweep::gpu
  std::map<std::string, std::string> board_source;  // by gpu: "spec data/gpus/v100.json", "stand-in, power limit 250 W (file)"...
  std::vector<std::string> notes;
};

// Throws std::invalid_argument (a bad file: its name and line; a board without spec or power limit; no kernel
// left to check) or std::runtime_error (a file that cannot be read).
CheckInput read_check_input(const std::vector<std::string>& paths, const ModelCheckOptions& options);

// The model's clock choice against the oracle's for one kernel under a slowdown bound ε, all from the MEASURED
// samples at one memory clock. Reference: the top (highest measured) SM clock. Oracle: the measured clock of
// least measured energy with measured time ≤ (1 + ε)·t_top. Model: the measured clock of least MODELLED energy
// with MODELLED time ≤ (1 + ε)·the MODELLED time at the top clock (the interpolation split's fit at every clock,
// SweepEval::interp_every). Savings = 1 − E(f)/E(top), MEASURED.
struct ClockChoice {
  double max_slowdown = 0;  // ε, fraction
  int top_mhz = 0, oracle_mhz = 0, model_mhz = 0;
  double oracle_saving = 0, model_saving = 0;  // fractions, MEASURED
  double model_slowdown = 0;                   // t(model_mhz)/t_top − 1, MEASURED
  bool over_bound = false;                     // model_slowdown > ε
};
ClockChoice choose_clock(const std::vector<HeldOut>& every, double max_slowdown);

inline constexpr double kSlowdownBounds[4] = {0.0, 0.01, 0.02, 0.05};

struct KernelCheck {
  std::string source, gpu, kernel;
  int mem_mhz = 0, clocks = 0;
  std::vector<int> interp_calib_mhz, extrap_calib_mhz;
  std::vector<HeldOut> interp, extrap;  // held-out clocks: MEASURED beside MODELLED and the baselines
  ClockChoice choice[4];                // at kSlowdownBounds
};

// Pooled over a set of kernels: the held-out points of all of them, and the clock choices summed.
struct ChoiceSummary {
  double max_slowdown = 0;
  int kernels = 0;
  double oracle_saving_mean = 0, model_saving_mean = 0;  // fractions, MEASURED, mean over kernels
  double kept = -1;  // Σ model saving / Σ oracle saving; -1 when the oracle saves nothing
  int over_bound = 0;
};
struct PooledCheck {
  std::string label;  // a file name, or "all"
  int kernels = 0;
  ErrorStats interp_model, interp_baseline, extrap_model, extrap_baseline;
  ChoiceSummary choice[4];
};

struct ModelCheck {
  std::vector<KernelCheck> kernels;
  std::vector<PooledCheck> per_file;  // files with a checked kernel, in the order given
  PooledCheck all;
};

ModelCheck check_model(const CheckInput& input);

}  // namespace gearshift::model
