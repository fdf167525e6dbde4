#include "sim/saving_range.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "model/prior_spread.hpp"
#include "sim/simulator.hpp"

namespace gearshift::sim {
namespace {

constexpr int kClasses = 8;  // model::KernelClass values

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(std::floor(pos));
  const std::size_t j = std::min(i + 1, v.size() - 1);
  return v[i] + (pos - static_cast<double>(i)) * (v[j] - v[i]);
}

}  // namespace

SavingRange saving_range(const model::Workload& w, const model::DvfsModel& m, const plan::Schedule& plan,
                         double switch_latency_ns, double max_slowdown, const RangeOptions& o) {
  if (o.samples <= 0) throw std::invalid_argument("saving_range: samples must be > 0");
  if (!(o.low_quantile >= 0 && o.low_quantile <= o.high_quantile && o.high_quantile <= 1))
    throw std::invalid_argument("saving_range: quantiles must satisfy 0 <= low <= high <= 1");
  SavingRange r;
  r.samples = o.samples;
  r.low_quantile = o.low_quantile;
  r.high_quantile = o.high_quantile;
  const plan::Schedule base_schedule = default_schedule(w, m);
  {
    const SimResult b = simulate(w, m, base_schedule, 0), p = simulate(w, m, plan, switch_latency_ns);
    r.saving_expected_pct = (b.energy_j - p.energy_j) / b.energy_j * 100;
    r.time_expected_ns = p.step_time_ns;
  }
  model::Workload drawn = w;
  model::NormalDraws draws(o.seed);
  std::vector<double> saving, time, slowdown;
  int over = 0;
  for (int i = 0; i < o.samples; ++i) {
    double da[kClasses], du[kClasses];
    for (int c = 0; c < kClasses; ++c) {
      const model::PriorSpread s = model::prior_spread(static_cast<model::KernelClass>(c));
      da[c] = s.sm_share_sd * draws.next();
      du[c] = s.activity_log_sd * draws.next();
    }
    // A drawn activity may cap the default clock elsewhere: unsampled reference clocks follow the draw
    // (model::refresh_reference_clocks), computed once per class for ops that carry their class prior.
    bool have[kClasses] = {};
    model::ClockPair ref[kClasses];
    for (std::size_t k = 0; k < w.ops.size(); ++k) {
      const auto& op = w.ops[k];
      const int c = static_cast<int>(op.cls);
      auto& d = drawn.ops[k];
      d.coeffs = model::perturb(op.coeffs, da[c], du[c]);
      if (op.ref_sampled) continue;
      const bool prior = op.coeffs == model::class_prior(op.cls);
      if (prior && have[c]) {
        d.ref = ref[c];
        continue;
      }
      d.ref = m.default_reference(d.coeffs);
      if (prior) have[c] = true, ref[c] = d.ref;
    }
    const SimResult b = simulate(drawn, m, base_schedule, 0), p = simulate(drawn, m, plan, switch_latency_ns);
    saving.push_back((b.energy_j - p.energy_j) / b.energy_j * 100);
    time.push_back(p.step_time_ns);
    const double p_s = p.step_time_ns * 1e-9, b_s = b.step_time_ns * 1e-9;  // in s as always: the same last digit
    const double sd = (p_s - b_s) / b_s;
    slowdown.push_back(sd * 100);
    over += sd > max_slowdown;
  }
  r.saving_low_pct = quantile(saving, o.low_quantile);
  r.saving_high_pct = quantile(saving, o.high_quantile);
  r.time_low_ns = quantile(time, o.low_quantile);
  r.time_high_ns = quantile(time, o.high_quantile);
  r.slowdown_low_pct = quantile(slowdown, o.low_quantile);
  r.slowdown_high_pct = quantile(slowdown, o.high_quantile);
  r.p_over_budget = static_cast<double>(over) / o.samples;
  return r;
}

}  // namespace gearshift::sim
