#include "model/dvfs_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace gearshift::model {

PowerParams power_params_for(const gpu::GpuSpec& s) { return power_params_for(s, s.memory_power_w_at_max_clock); }

PowerParams power_params_for(const gpu::GpuSpec& s, double memory_w_at_max) {
  PowerParams p;
  p.idle_w_at_min_clock = s.idle_power_min_clock_w;
  p.idle_w_at_max_clock = s.idle_power_max_clock_w;
  p.min_sm_mhz = s.min_sm_clock_mhz();
  p.max_sm_mhz = s.max_sm_clock_mhz();
  p.knee_mhz = s.voltage_knee_mhz;
  p.max_mem_mhz = s.max_mem_clock_mhz();
  p.memory_w_at_max = memory_w_at_max;
  p.power_cap_w = s.power_limit_default_w;
  p.gap_decay_ns = s.gap_power_decay_ns;
  const KernelCoefficients gemm = class_prior(KernelClass::gemm);
  const double mem_w = gemm.mem_traffic * memory_w_at_max;  // at the default (max) memory clock
  if (s.observed_capped_sm_clock_mhz > 0) {
    // P_idle(fc) + u·P_dyn·V(fc)²·fc/fmax + mem = cap  =>  P_dyn
    const int fc = s.observed_capped_sm_clock_mhz;
    double x = fc <= p.knee_mhz ? 0.0 : static_cast<double>(fc - p.knee_mhz) / (p.max_sm_mhz - p.knee_mhz);
    double v = p.v_min_ratio + (1 - p.v_min_ratio) * std::min(1.0, x);
    double idle = p.idle_w_at_min_clock + (p.idle_w_at_max_clock - p.idle_w_at_min_clock) *
                                              static_cast<double>(fc - p.min_sm_mhz) / (p.max_sm_mhz - p.min_sm_mhz);
    p.dynamic_w_at_max = std::max(1.0, (p.power_cap_w - idle - mem_w) / (gemm.activity * v * v * fc / p.max_sm_mhz));
  } else {
    p.dynamic_w_at_max = std::max(1.0, 1.08 * s.max_board_power_w - s.idle_power_max_clock_w - mem_w);
  }
  return p;
}

DvfsModel::DvfsModel(gpu::GpuSpec spec, PowerParams params) : spec_(std::move(spec)), params_(params) {
  if (spec_.sm_clocks_mhz.empty() || spec_.mem_clocks_mhz.empty())
    throw std::invalid_argument("DvfsModel: GPU spec without supported clocks");
  if (params_.max_sm_mhz <= params_.min_sm_mhz || params_.max_mem_mhz <= 0)
    throw std::invalid_argument("DvfsModel: bad clock range in power parameters");
}

double DvfsModel::voltage_ratio(int f) const { return voltage_ratio_at(f); }
double DvfsModel::idle_power_w(int f) const { return idle_power_w_at(f); }
double DvfsModel::dynamic_power_w(ClockPair c, const KernelCoefficients& k) const {
  return dynamic_power_w_at(c.sm_mhz, c.mem_mhz, k);
}

double DvfsModel::voltage_ratio_at(double f) const {
  const auto& p = params_;
  if (f <= p.knee_mhz || p.knee_mhz >= p.max_sm_mhz) return p.v_min_ratio;
  double x = (f - p.knee_mhz) / (p.max_sm_mhz - p.knee_mhz);
  return p.v_min_ratio + (1.0 - p.v_min_ratio) * std::min(1.0, x);
}

double DvfsModel::idle_power_w_at(double f) const {
  const auto& p = params_;
  double x = (f - p.min_sm_mhz) / (p.max_sm_mhz - p.min_sm_mhz);
  return p.idle_w_at_min_clock + (p.idle_w_at_max_clock - p.idle_w_at_min_clock) * std::clamp(x, 0.0, 1.0);
}

double DvfsModel::dynamic_power_w_at(double f, int mem_mhz, const KernelCoefficients& k) const {
  const auto& p = params_;
  double v = voltage_ratio_at(f);
  double core = p.activity_scale * k.activity * p.dynamic_w_at_max * v * v * f / p.max_sm_mhz;
  double mem = k.mem_traffic * p.memory_w_at_max * mem_mhz / p.max_mem_mhz;
  return k.static_w + core + mem;
}

double DvfsModel::power_limit_w(double g) const {
  const double cap = params_.power_cap_w;
  if (!(g > 0)) return cap;
  g = std::min(g, 0.999);  // a window all gap: the limit no longer binds; keep the figure finite
  return std::max(cap, (cap - params_.idle_w_at_max_clock * g) / (1 - g));
}

int DvfsModel::capped_sm_clock(ClockPair requested, const KernelCoefficients& k, double window_idle_share) const {
  const auto& clocks = spec_.sm_clocks_mhz;
  auto it = std::upper_bound(clocks.begin(), clocks.end(), requested.sm_mhz);
  if (it == clocks.begin()) return clocks.front();
  const double limit = power_limit_w(window_idle_share);
  auto fits = [&](int f) { return idle_power_w(f) + dynamic_power_w({f, requested.mem_mhz}, k) <= limit; };
  // Power rises with the clock when idle power does and the kernel's activity is not negative (V and f both
  // rise): the clocks under the cap are then a prefix, and a binary search finds the same clock as the walk
  // down below (a heavily drawn activity caps far below the default clock: sim/saving_range.hpp).
  if (params_.idle_w_at_max_clock >= params_.idle_w_at_min_clock && k.activity >= 0 && params_.activity_scale >= 0) {
    if (fits(*std::prev(it))) return *std::prev(it);
    auto lo = clocks.begin(), hi = std::prev(it);  // fits(*hi) is false; find the last clock that fits
    if (!fits(*lo)) return *lo;
    while (hi - lo > 1) {
      auto mid = lo + (hi - lo) / 2;
      (fits(*mid) ? lo : hi) = mid;
    }
    return *lo;
  }
  for (auto f = std::prev(it);; --f) {
    ClockPair c{*f, requested.mem_mhz};
    if (idle_power_w(*f) + dynamic_power_w(c, k) <= limit || f == clocks.begin()) return *f;
  }
}

double DvfsModel::capped_sm_clock_avg(ClockPair requested, const KernelCoefficients& k,
                                      double window_idle_share) const {
  if (!params_.continuous_cap) return capped_sm_clock(requested, k, window_idle_share);
  const double limit = power_limit_w(window_idle_share);
  auto power = [&](double f) { return idle_power_w_at(f) + dynamic_power_w_at(f, requested.mem_mhz, k); };
  double hi = requested.sm_mhz;
  if (power(hi) <= limit) return hi;
  double lo = spec_.sm_clocks_mhz.front();
  if (power(lo) > limit) return lo;
  // Power rises with f (V and f both non-decreasing), so bisection finds the single crossing.
  for (int i = 0; i < 100 && hi - lo > 1e-9; ++i) {
    double mid = 0.5 * (lo + hi);
    (power(mid) > limit ? hi : lo) = mid;
  }
  return lo;
}

double DvfsModel::power_w(ClockPair requested, const KernelCoefficients& k, double window_idle_share) const {
  double f = capped_sm_clock_avg(requested, k, window_idle_share);
  return idle_power_w_at(f) + dynamic_power_w_at(f, requested.mem_mhz, k);
}

ClockPair DvfsModel::default_reference(const KernelCoefficients& k, double window_idle_share) const {
  ClockPair def{spec_.default_sm_clock_mhz, spec_.default_mem_clock_mhz};
  return {capped_sm_clock(def, k, window_idle_share), def.mem_mhz};
}

Prediction DvfsModel::predict(double t_ref_ns, ClockPair ref, ClockPair requested, const KernelCoefficients& k,
                              double window_idle_share) const {
  Prediction out;
  out.effective_sm_mhz = capped_sm_clock(requested, k, window_idle_share);
  out.effective_sm_mhz_avg = params_.continuous_cap ? capped_sm_clock_avg(requested, k, window_idle_share)
                                                    : out.effective_sm_mhz;
  const double a = k.sm_share, b = k.mem_share, f = out.effective_sm_mhz_avg;
  if (k.time_law == TimeLaw::roofline)  // the slower term bounds it: no slowing past the kink for free
    out.time_ns = t_ref_ns * (std::max(a * ref.sm_mhz / f, b * static_cast<double>(ref.mem_mhz) / requested.mem_mhz) +
                              (1.0 - std::max(a, b)));
  else
    out.time_ns = t_ref_ns * (a * ref.sm_mhz / f + b * static_cast<double>(ref.mem_mhz) / requested.mem_mhz +
                              (1.0 - a - b));
  out.idle_power_w = idle_power_w_at(f);
  out.power_w = out.idle_power_w + dynamic_power_w_at(f, requested.mem_mhz, k);
  out.energy_j = out.power_w * out.time_ns * 1e-9;
  return out;
}

double DvfsModel::gap_tail_ns(double gap_ns) const {
  const double tau = params_.gap_decay_ns;
  if (!(tau > 0) || !(gap_ns > 0)) return 0;
  return -tau * std::expm1(-gap_ns / tau);
}

}  // namespace gearshift::model
