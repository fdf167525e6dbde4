#include "model/fit_validation.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace gearshift::model {

std::vector<Split> standard_splits(const std::vector<int>& clocks_mhz) {
  std::vector<int> c = clocks_mhz;
  std::sort(c.begin(), c.end());
  if (c.size() < 4) throw std::invalid_argument("standard_splits: need at least 4 clocks");
  const int top = c.back();
  for (int f : {top - 105, top - 210})
    if (!std::binary_search(c.begin(), c.end(), f))
      throw std::invalid_argument("standard_splits: extrapolation clock " + std::to_string(f) + " MHz not in the sweep");
  return {{"interpolation", {c.front(), c[c.size() / 2], top}}, {"extrapolation", {top - 210, top - 105, top}}};
}

double baseline_time_s(const std::vector<Sample>& calib, int sm_mhz) {
  if (calib.size() < 2) throw std::invalid_argument("baseline_time_s: need at least 2 samples");
  double n = static_cast<double>(calib.size()), mx = 0, my = 0;
  for (const auto& s : calib) mx += 1.0 / s.sm_mhz / n, my += s.time_s / n;
  double sxx = 0, sxy = 0;
  for (const auto& s : calib) sxx += (1.0 / s.sm_mhz - mx) * (1.0 / s.sm_mhz - mx), sxy += (1.0 / s.sm_mhz - mx) * (s.time_s - my);
  const double a = sxy / sxx;
  return my - a * mx + a / sm_mhz;
}

double baseline_energy_j(const std::vector<Sample>& calib, int sm_mhz) {
  if (calib.size() != 3) throw std::invalid_argument("baseline_energy_j: needs exactly 3 samples");
  const double f = sm_mhz;
  double e = 0;
  for (std::size_t i = 0; i < 3; ++i) {  // Lagrange form
    double w = calib[i].energy_j;
    for (std::size_t j = 0; j < 3; ++j)
      if (j != i) w *= (f - calib[j].sm_mhz) / static_cast<double>(calib[i].sm_mhz - calib[j].sm_mhz);
    e += w;
  }
  return e;
}

std::vector<HeldOut> evaluate_split(const std::vector<Sample>& sweep, const Split& split, const DvfsModel& board,
                                    const FitOptions& opts) {
  std::vector<Sample> calib;
  for (const auto& s : sweep)
    if (std::find(split.calib_mhz.begin(), split.calib_mhz.end(), s.sm_mhz) != split.calib_mhz.end()) calib.push_back(s);
  if (calib.size() != split.calib_mhz.size())
    throw std::invalid_argument("evaluate_split: a calibration clock of split '" + split.name + "' is not in the sweep");
  const FittedKernel k = fit_kernel(calib, board, opts);
  const DvfsModel m = k.model(board.spec());
  std::vector<HeldOut> out;
  for (const auto& s : sweep) {
    if (std::find(split.calib_mhz.begin(), split.calib_mhz.end(), s.sm_mhz) != split.calib_mhz.end()) continue;
    const Prediction p = predict(m, k, s.sm_mhz);
    out.push_back({s.sm_mhz, s.time_s, s.energy_j, p.time_ns * 1e-9, p.energy_j, baseline_time_s(calib, s.sm_mhz),
                   baseline_energy_j(calib, s.sm_mhz)});
  }
  return out;
}

namespace {
ErrorStats stats(const std::vector<HeldOut>& pts, bool model) {
  ErrorStats e;
  for (const auto& p : pts) {
    const double t = 100 * std::abs((model ? p.model_time_s : p.baseline_time_s) / p.time_s - 1);
    const double en = 100 * std::abs((model ? p.model_energy_j : p.baseline_energy_j) / p.energy_j - 1);
    ++e.n;
    e.time_mape_pct += t, e.energy_mape_pct += en;
    e.time_max_pct = std::max(e.time_max_pct, t), e.energy_max_pct = std::max(e.energy_max_pct, en);
  }
  if (e.n) e.time_mape_pct /= e.n, e.energy_mape_pct /= e.n;
  return e;
}
}  // namespace

ErrorStats model_errors(const std::vector<HeldOut>& points) { return stats(points, true); }
ErrorStats baseline_errors(const std::vector<HeldOut>& points) { return stats(points, false); }

}  // namespace gearshift::model
