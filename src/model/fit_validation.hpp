// Validation of fit_kernel on measured clock sweeps: calibrate on a few clocks, predict the others, and compare
// with two naive baselines on the same calibration clocks. Used by bench/model_validation and its test.
#pragma once

#include <string>
#include <vector>

#include "model/fit.hpp"

namespace gearshift::model {

struct Split {
  std::string name;            // "interpolation" or "extrapolation"
  std::vector<int> calib_mhz;  // calibration SM clocks, MHz; every other clock of the sweep is held out
};

// interpolation: the lowest, middle (index n/2 of the ascending clocks) and highest clock;
// extrapolation: the highest clock and the clocks 105 and 210 MHz below it (what a cautious user sweeps; on
// A100: 1410, 1305, 1200 MHz). Throws std::invalid_argument if a needed clock is missing or n < 4.
std::vector<Split> standard_splits(const std::vector<int>& clocks_mhz);

// Naive baselines on the calibration samples (not physics): time = A/f + B by least squares (needs ≥ 2) and
// energy by the quadratic in f through exactly 3 samples.
double baseline_time_s(const std::vector<Sample>& calib, int sm_mhz);
double baseline_energy_j(const std::vector<Sample>& calib, int sm_mhz);

// One held-out clock: measured values and the predictions from the calibration samples.
struct HeldOut {
  int sm_mhz = 0;                                      // MHz
  double time_s = 0, energy_j = 0;                     // measured
  double model_time_s = 0, model_energy_j = 0;         // modelled: fit_kernel + DvfsModel::predict
  double baseline_time_s = 0, baseline_energy_j = 0;   // naive baselines
};

// Fit `sweep`'s calibration clocks with `board`'s parameters and predict every other clock of the sweep.
std::vector<HeldOut> evaluate_split(const std::vector<Sample>& sweep, const Split& split, const DvfsModel& board,
                                    const FitOptions& opts = {});

// Absolute relative errors |predicted/measured − 1| in percent.
struct ErrorStats {
  int n = 0;
  double time_mape_pct = 0, time_max_pct = 0, energy_mape_pct = 0, energy_max_pct = 0;
};
ErrorStats model_errors(const std::vector<HeldOut>& points);
ErrorStats baseline_errors(const std::vector<HeldOut>& points);

}  // namespace gearshift::model
