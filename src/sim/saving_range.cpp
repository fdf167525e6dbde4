#include "sim/saving_range.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "model/prior_spread.hpp"
#include "sim/power_attribution.hpp"
#include "sim/simulator.hpp"

namespace gearshift::sim {
namespace {

constexpr int kClasses = 8;  // model::KernelClass values
// A draw reproduces the measured power within kPowerLevelTolerance, found in at most 16 updates.
constexpr int kLevelIterations = 16;

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
  r.level_normalised = o.level_normalised;
  r.low_quantile = o.low_quantile;
  r.high_quantile = o.high_quantile;
  const plan::Schedule base_schedule = default_schedule(w, m);
  double level_w = 0;  // the baseline's average power (below)
  {
    const SimResult b = simulate(w, m, base_schedule, 0), p = simulate(w, m, plan, switch_latency_ns);
    r.saving_expected_pct = (b.energy_j - p.energy_j) / b.energy_j * 100;
    r.time_expected_ns = p.step_time_ns;
    level_w = b.average_power_w;
  }
  // Every draw must reproduce what was measured: the baseline's average power at default clocks (the plan's
  // calibration set the model's to the trace's measured power) and the dense GEMMs' clock sag at the power cap
  // (the spec's observation, or the clocks the trace sampled on its GEMMs, which set the model's dynamic power).
  // So the GEMM class keeps its activity (the other classes' activities are drawn relative to it, and none above
  // it: no kernel class of a training step draws more SM power than a dense GEMM), and one scale on the other
  // classes' activity brings the draw's baseline power back to the level. A draw that no scale brings within
  // kPowerLevelTolerance is a model the measurement rules out: it is left out of the quantiles.
  constexpr int kGemm = static_cast<int>(model::KernelClass::gemm);
  model::Workload drawn = w;
  std::vector<double> drawn_activity(w.ops.size());
  const double gemm_activity = model::class_prior(model::KernelClass::gemm).activity;
  model::NormalDraws draws(o.seed);
  std::vector<double> saving, time, slowdown;
  int over = 0, below = 0;
  for (int i = 0; i < o.samples; ++i) {
    double da[kClasses], du[kClasses];
    for (int c = 0; c < kClasses; ++c) {
      const model::PriorSpread s = model::prior_spread(static_cast<model::KernelClass>(c));
      da[c] = s.sm_share_sd * draws.next();
      du[c] = s.activity_log_sd * draws.next();
    }
    if (o.level_normalised) du[kGemm] = 0;
    for (std::size_t k = 0; k < w.ops.size(); ++k) {
      const int c = static_cast<int>(w.ops[k].cls);
      drawn.ops[k].coeffs = model::perturb(w.ops[k].coeffs, da[c], du[c]);
      drawn_activity[k] = drawn.ops[k].coeffs.activity;
    }
    // Baseline with the non-GEMM activities scaled by g. A drawn activity may cap the default clock elsewhere:
    // unsampled reference clocks follow the draw (model::refresh_reference_clocks), computed once per class for
    // ops that carry their class prior.
    auto baseline_at = [&](double g) {
      bool have[kClasses] = {};
      model::ClockPair ref[kClasses];
      for (std::size_t k = 0; k < w.ops.size(); ++k) {
        const auto& op = w.ops[k];
        const int c = static_cast<int>(op.cls);
        auto& d = drawn.ops[k];
        if (c != kGemm && o.level_normalised) d.coeffs.activity = std::min(drawn_activity[k] * g, gemm_activity);
        if (op.ref_sampled) continue;
        const bool prior = op.coeffs == model::class_prior(op.cls);
        // The class's reference is shared only by positions that meet the cap itself (no idle in their window).
        const bool shared = prior && !(op.window_idle_share > 0);
        if (shared && have[c]) {
          d.ref = ref[c];
          continue;
        }
        d.ref = m.default_reference(d.coeffs, op.window_idle_share);
        if (shared) have[c] = true, ref[c] = d.ref;
      }
      return simulate(drawn, m, base_schedule, 0);
    };
    SimResult b;
    if (!o.level_normalised) {
      b = baseline_at(1);
    } else {
      // P(g) rises with g (linearly until ops cap, then more slowly; the cap's discrete clocks make it step a
      // little): proportional updates from the power at g = 0, bisection on ln g once the level is bracketed.
      const double floor_w = baseline_at(0).average_power_w;
      double g = 1, lo = 0, hi = 0;
      bool have_lo = false, have_hi = false, found = false;
      for (int it = 0; it < kLevelIterations && floor_w < level_w * (1 + kPowerLevelTolerance); ++it) {
        b = baseline_at(g);
        if (std::abs(b.average_power_w / level_w - 1) <= kPowerLevelTolerance) {
          found = true;
          break;
        }
        (b.average_power_w < level_w ? have_lo : have_hi) = true;
        (b.average_power_w < level_w ? lo : hi) = std::log(g);
        const double above = b.average_power_w - floor_w;
        if (have_lo && have_hi) g = std::exp(0.5 * (lo + hi));
        else g = above > 0 ? g * (level_w - floor_w) / above : g * 4;
        if (!(g > 1e-6 && g < 1e6)) break;
      }
      if (!found) {
        ++r.draws_rejected;
        continue;
      }
    }
    const SimResult p = simulate(drawn, m, plan, switch_latency_ns);
    saving.push_back((b.energy_j - p.energy_j) / b.energy_j * 100);
    below += saving.back() < r.saving_expected_pct;
    time.push_back(p.step_time_ns);
    const double p_s = p.step_time_ns * 1e-9, b_s = b.step_time_ns * 1e-9;  // in s as always: the same last digit
    const double sd = (p_s - b_s) / b_s;
    slowdown.push_back(sd * 100);
    over += sd > max_slowdown;
  }
  if (saving.empty()) {
    // No draw reproduces the measured power: the range would rest on nothing. The expected figures stand alone.
    r.saving_low_pct = r.saving_high_pct = r.saving_expected_pct;
    r.time_low_ns = r.time_high_ns = r.time_expected_ns;
    r.saving_median_pct = r.saving_expected_pct;
    return r;
  }
  r.saving_low_pct = quantile(saving, o.low_quantile);
  r.saving_high_pct = quantile(saving, o.high_quantile);
  r.saving_median_pct = quantile(saving, 0.5);
  r.time_low_ns = quantile(time, o.low_quantile);
  r.time_high_ns = quantile(time, o.high_quantile);
  r.slowdown_low_pct = quantile(slowdown, o.low_quantile);
  r.slowdown_high_pct = quantile(slowdown, o.high_quantile);
  r.p_over_budget = static_cast<double>(over) / static_cast<double>(saving.size());
  r.share_below_expected = static_cast<double>(below) / static_cast<double>(saving.size());
  return r;
}

std::string expected_outside_range(const SavingRange& r) {
  const bool above = r.saving_expected_pct > r.saving_high_pct, below = r.saving_expected_pct < r.saving_low_pct;
  if (r.samples <= 0 || !(above || below)) return {};
  return fmt::format("the expected {:.2f} % lies {} the range: {:.1f} % of the draws save less, their median {:.2f} %; "
                     "read it as {} figure",
                     r.saving_expected_pct, above ? "above" : "below", 100 * r.share_below_expected,
                     r.saving_median_pct, above ? "an upper" : "a lower");
}

void include_other_reading(SavingRange& r, double saving_pct) {
  r.other_reading_saving_pct = saving_pct;
  r.saving_low_pct = std::min(r.saving_low_pct, saving_pct);
  r.saving_high_pct = std::max(r.saving_high_pct, saving_pct);
}

}  // namespace gearshift::sim
