#include "sim/power_attribution.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "model/kernel_class.hpp"
#include "sim/simulator.hpp"

namespace gearshift::sim {
namespace {

// The reading reproduces the measured power when its baseline is within 1 % of it: the power cap's discrete
// clocks make the power step by up to ~1 % as ops cap (sim/saving_range.cpp holds its draws to the same).
constexpr double kLevelTolerance = 0.01;
constexpr int kBisections = 40;

}  // namespace

SurplusAsActivity place_surplus_as_activity(model::Workload& w, model::DvfsModel& m, double measured_w,
                                            double memory_w) {
  if (!(measured_w > 0)) throw std::invalid_argument("place_surplus_as_activity: the measured power must be > 0 W");
  if (!(memory_w >= 0)) throw std::invalid_argument("place_surplus_as_activity: the memory power must be >= 0 W");
  SurplusAsActivity r;
  r.memory_w = memory_w;
  m.set_params(model::power_params_for(m.spec(), memory_w));
  const double gemm_activity = model::class_prior(model::KernelClass::gemm).activity;
  std::vector<double> own(w.ops.size());
  double most = 1;  // the factor that brings every non-GEMM kernel to a dense GEMM's activity
  for (std::size_t k = 0; k < w.ops.size(); ++k) {
    own[k] = w.ops[k].coeffs.activity;
    if (w.ops[k].cls != model::KernelClass::gemm && own[k] > 0) most = std::max(most, gemm_activity / own[k]);
  }
  const plan::Schedule base = default_schedule(w, m);
  auto power_at = [&](double g) {
    for (std::size_t k = 0; k < w.ops.size(); ++k)
      if (w.ops[k].cls != model::KernelClass::gemm)
        w.ops[k].coeffs.activity = std::min(own[k] * g, std::max(own[k], gemm_activity));
    model::refresh_reference_clocks(w, m);
    return simulate(w, m, base, 0).average_power_w;
  };
  // The surplus is power above what the priors draw, so the factor is at least 1; the power rises with it
  // (more slowly once kernels cap), so bisection on ln g between 1 and `most` finds the level.
  double lo = 0, hi = std::log(most);
  if (power_at(most) < measured_w * (1 - kLevelTolerance)) {
    r.activity_factor = most;
    r.baseline_power_w = power_at(most);
    return r;
  }
  for (int i = 0; i < kBisections; ++i) {
    const double mid = 0.5 * (lo + hi);
    (power_at(std::exp(mid)) < measured_w ? lo : hi) = mid;
  }
  r.activity_factor = std::exp(hi);
  r.baseline_power_w = power_at(r.activity_factor);
  r.reached = std::fabs(r.baseline_power_w / measured_w - 1) <= kLevelTolerance;
  return r;
}

std::string refusal_in_reading(const PlanUnderReading& p, double max_slowdown) {
  if (!(p.saving_pct > 0)) return fmt::format("costs energy (MODELLED saving {:.2f} %)", p.saving_pct);
  if (p.slowdown_pct > 100 * (max_slowdown + kReadingSlowdownTolerance))
    return fmt::format("breaks the step-time budget ({:.2f} % against {:.2f} %)", p.slowdown_pct, 100 * max_slowdown);
  return {};
}

PlanUnderReading plan_under(const model::Workload& w, const model::DvfsModel& m, const plan::Schedule& s,
                            double switch_latency_ns) {
  const SimResult b = simulate(w, m, default_schedule(w, m), 0), p = simulate(w, m, s, switch_latency_ns);
  PlanUnderReading r;
  r.saving_pct = (b.energy_j - p.energy_j) / b.energy_j * 100;
  // In s, as every written step figure (docs/design.md, Units).
  const double b_s = b.step_time_ns * 1e-9, p_s = p.step_time_ns * 1e-9;
  r.slowdown_pct = (p_s - b_s) / b_s * 100;
  r.baseline_step_ns = b.step_time_ns;
  return r;
}

}  // namespace gearshift::sim
