#include "sim/power_attribution.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "model/kernel_class.hpp"
#include "model/prior_spread.hpp"
#include "sim/simulator.hpp"

namespace gearshift::sim {
namespace {

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
  std::vector<double> own(w.ops.size()), sd(w.ops.size());
  for (std::size_t k = 0; k < w.ops.size(); ++k) {
    own[k] = w.ops[k].coeffs.activity;
    sd[k] = w.ops[k].cls == model::KernelClass::gemm ? 0 : model::prior_spread(w.ops[k].cls).activity_log_sd;
  }
  const plan::Schedule base = default_schedule(w, m);
  auto power_at = [&](double z) {
    for (std::size_t k = 0; k < w.ops.size(); ++k)
      if (sd[k] > 0) w.ops[k].coeffs.activity = std::min(own[k] * std::exp(z * sd[k]), std::max(own[k], gemm_activity));
    model::refresh_reference_clocks(w, m);
    return simulate(w, m, base, 0).average_power_w;
  };
  // The surplus is power above what the priors draw, so z >= 0; the power rises with z (more slowly once kernels
  // cap), so bisection between 0 and the bound finds the level.
  double lo = 0, hi = kMaxReadingSigmas;
  if (power_at(hi) < measured_w * (1 - kPowerLevelTolerance)) {
    r.sigmas = hi;
    r.baseline_power_w = power_at(hi);
    return r;
  }
  for (int i = 0; i < kBisections; ++i) {
    const double mid = 0.5 * (lo + hi);
    (power_at(mid) < measured_w ? lo : hi) = mid;
  }
  // Where the power levels off just below the measurement (every kernel capped), the least z within the
  // tolerance, not the bound the bisection ran to.
  if (power_at(hi) < measured_w) {
    lo = 0;
    for (int i = 0; i < kBisections; ++i) {
      const double mid = 0.5 * (lo + hi);
      (power_at(mid) < measured_w * (1 - kPowerLevelTolerance) ? lo : hi) = mid;
    }
  }
  r.sigmas = hi;
  r.baseline_power_w = power_at(hi);
  r.reached = std::fabs(r.baseline_power_w / measured_w - 1) <= kPowerLevelTolerance;
  return r;
}

std::string other_reading_intro(double memory_w, double bound_w, double sigmas, double measured_w) {
  return fmt::format("the calibration puts {:.0f} W in memory/uncore power, more than the {:.0f} W memory can draw; "
                     "read instead as SM activity (the non-GEMM kernels' activity raised by {:.2f} standard deviations "
                     "of their class priors' measured error), the same measured {:.0f} W gives",
                     memory_w, bound_w, sigmas, measured_w);
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
