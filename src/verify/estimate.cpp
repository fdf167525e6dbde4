#include "verify/estimate.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <boost/math/distributions/students_t.hpp>

namespace gearshift::verify {

double t_quantile(double p, double df) {
  if (!(df >= 1) || !(p > 0 && p < 1)) throw std::invalid_argument("t_quantile: need df >= 1 and 0 < p < 1");
  return boost::math::quantile(boost::math::students_t(df), p);
}

namespace {

struct Mean {
  double mean = 0, sd = 0;
  std::size_t n = 0;
};

Mean mean_sd(const std::vector<double>& x) {
  Mean m;
  m.n = x.size();
  if (x.empty()) return m;
  for (double v : x) m.mean += v;
  m.mean /= static_cast<double>(x.size());
  if (x.size() < 2) return m;
  double ss = 0;
  for (double v : x) ss += (v - m.mean) * (v - m.mean);
  m.sd = std::sqrt(ss / static_cast<double>(x.size() - 1));
  return m;
}

// The squared coefficient of variation of an arm's mean step (the steps' long-run relative variance over their
// count); 0 without a block of at least 2 steps.
double mean_cv2(const ArmTotals& a) {
  if (a.half_blocks == 0 || a.steps == 0) return 0;
  return a.half_var_sum / static_cast<double>(a.half_blocks) / static_cast<double>(a.steps);
}

// exp(mean ± t·sd/√n) as a ratio's interval, sd at least `sd_floor`; `sign` -1 turns a ratio r into 1 - r
// (saving), +1 into r - 1.
Interval interval(const Mean& m, double confidence, int sign, double sd_floor) {
  double h = 0;
  if (m.n >= 2)
    h = t_quantile(0.5 + confidence / 2, static_cast<double>(m.n - 1)) * std::max(m.sd, sd_floor) /
        std::sqrt(static_cast<double>(m.n));
  const double mid = std::exp(m.mean), a = std::exp(m.mean - h), b = std::exp(m.mean + h);
  if (sign > 0) return {mid - 1, a - 1, b - 1};
  return {1 - mid, 1 - b, 1 - a};
}

}  // namespace

AbEstimate estimate(const std::vector<Quad>& quads, double confidence) {
  if (!(confidence > 0 && confidence < 1)) throw std::invalid_argument("estimate: confidence must be in (0, 1)");
  AbEstimate e;
  e.confidence = confidence;
  std::vector<double> x, y;
  double floor2 = 0;
  for (const Quad& q : quads) {
    if (q.plan.steps == 0 || q.base.steps == 0 || q.plan.seconds <= 0 || q.base.seconds <= 0) continue;
    const double tp = q.plan.step_s(), tb = q.base.step_s();
    x.push_back(std::log(tp / tb));
    floor2 += mean_cv2(q.plan) + mean_cv2(q.base);
    e.steps += q.plan.steps + q.base.steps;
    if (q.has_energy() && q.plan.joules > 0 && q.base.joules > 0)
      y.push_back(std::log((q.plan.watts() * tp) / (q.base.watts() * tb)));
  }
  e.quads = x.size();
  e.energy_quads = y.size();
  if (x.empty()) return e;
  const Mean mx = mean_sd(x);
  // Energy per step is the arm's power times its step time: its log-ratio carries the step time's scatter too.
  e.sd_floor = std::sqrt(floor2 / static_cast<double>(x.size()));
  e.slowdown = interval(mx, confidence, +1, e.sd_floor);
  e.sd_log_time = mx.sd;
  if (y.size() >= 2) {
    const Mean my = mean_sd(y);
    e.saving = interval(my, confidence, -1, e.sd_floor);
    e.sd_log_energy = my.sd;
  }
  return e;
}

std::size_t quads_to_resolve(double sd_log, double resolution, double confidence, std::size_t max_quads) {
  if (!(resolution > 0)) throw std::invalid_argument("quads_to_resolve: resolution must be > 0");
  if (sd_log <= 0) return 2;
  // The half-width in log space for a ratio near 1 is the ratio's own to first order.
  auto resolves = [&](std::size_t q) {
    return t_quantile(0.5 + confidence / 2, static_cast<double>(q - 1)) * sd_log / std::sqrt(static_cast<double>(q)) <=
           resolution;
  };
  std::size_t lo = 2, hi = 2;
  while (!resolves(hi)) {
    if (hi >= max_quads) return max_quads;
    lo = hi;
    hi = std::min(max_quads, hi * 2);
  }
  while (lo < hi) {  // smallest resolving q in (lo, hi]
    const std::size_t mid = lo + (hi - lo) / 2;
    if (resolves(mid)) hi = mid;
    else lo = mid + 1;
  }
  return hi;
}

}  // namespace gearshift::verify
