#include "model/fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace gearshift::model {
namespace {

// Least squares for y = c0 + c1·x. Returns {c0, c1}. Needs ≥ 2 distinct x (checked by the callers).
struct Line {
  double c0 = 0, c1 = 0;
};
Line fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < x.size(); ++i) mx += x[i], my += y[i];
  mx /= n, my /= n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
  Line l;
  l.c1 = sxy / sxx;
  l.c0 = my - l.c1 * mx;
  return l;
}

void check(const std::vector<Sample>& s) {
  if (s.size() < 2)
    throw std::invalid_argument("fit_kernel: need samples at 2 or more distinct SM clocks, got " +
                                std::to_string(s.size()) + " sample(s)");
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto bad = [&](const char* what, double v) {
      throw std::invalid_argument("fit_kernel: sample " + std::to_string(i) + ": " + what +
                                  " must be finite and > 0, got " + std::to_string(v));
    };
    if (s[i].sm_mhz <= 0) bad("sm_mhz", s[i].sm_mhz);
    if (s[i].mem_mhz <= 0) bad("mem_mhz", s[i].mem_mhz);
    if (!std::isfinite(s[i].time_s) || s[i].time_s <= 0) bad("time_s", s[i].time_s);
    if (!std::isfinite(s[i].energy_j) || s[i].energy_j <= 0) bad("energy_j", s[i].energy_j);
    if (s[i].mem_mhz != s[0].mem_mhz)
      throw std::invalid_argument("fit_kernel: all samples must share one memory clock (sample " + std::to_string(i) +
                                  " has " + std::to_string(s[i].mem_mhz) + " MHz, sample 0 " +
                                  std::to_string(s[0].mem_mhz) + " MHz)");
  }
}

// Time law t = T_c·r(f) + A/f over `s` (r ≡ 1 without a shape), with the priors of fit.hpp (A ≥ 0, T_c ≥ 0).
Line fit_time(const std::vector<Sample>& s, const TimeShape& shape = {}) {
  if (shape.empty()) {
    std::vector<double> x, y;
    for (const auto& p : s) x.push_back(1.0 / p.sm_mhz), y.push_back(p.time_s);
    Line l = fit_line(x, y);
    if (l.c1 <= 0) {
      l.c1 = 0;
      l.c0 = 0;
      for (double t : y) l.c0 += t / static_cast<double>(y.size());
    } else if (l.c0 < 0) {
      double sxy = 0, sxx = 0;  // through the origin: t = A/f
      for (std::size_t i = 0; i < x.size(); ++i) sxy += x[i] * y[i], sxx += x[i] * x[i];
      l = {0, sxy / sxx};
    }
    return l;
  }
  // Two regressors, r(f) and 1/f, no intercept (with r ≡ 1 the same least squares as above).
  double rr = 0, rx = 0, xx = 0, ry = 0, xy = 0;
  for (const auto& p : s) {
    const double r = shape.at(p.sm_mhz), x = 1.0 / p.sm_mhz;
    rr += r * r, rx += r * x, xx += x * x, ry += r * p.time_s, xy += x * p.time_s;
  }
  const double det = rr * xx - rx * rx;
  Line l{(ry * xx - xy * rx) / det, (rr * xy - rx * ry) / det};
  if (!(det > 0) || l.c1 <= 0)
    l = {ry / rr, 0};
  else if (l.c0 < 0)
    l = {0, xy / xx};
  return l;
}

// The largest |law(f)/t − 1| over `s`.
double max_rel_error(const std::vector<Sample>& s, auto&& law) {
  double e = 0;
  for (const auto& p : s) e = std::max(e, std::abs(law(static_cast<double>(p.sm_mhz)) / p.time_s - 1));
  return e;
}

// Roofline law t = max(T_mem, A/f) over `s` (ascending clocks, ≥ 3): for each split with samples on both sides,
// A by relative least squares through the origin on the lower samples, T_mem by relative least squares on the
// upper ones; the split whose law (evaluated as the max, so a kink outside its split pays for it) misses its
// samples least (largest relative error). Returns {T_mem, A, that error}.
struct Roofline {
  double mem_s = 0, a_s_mhz = 0, residual = std::numeric_limits<double>::infinity();
};
Roofline fit_roofline(const std::vector<Sample>& s, const TimeShape& shape) {
  Roofline best;
  auto rf = [&](double f) { return shape.empty() ? 1.0 : shape.at(f); };
  for (std::size_t j = 1; j < s.size(); ++j) {
    double su = 0, suu = 0, sv = 0, svv = 0;
    for (std::size_t i = 0; i < j; ++i) {
      const double u = 1.0 / (s[i].sm_mhz * s[i].time_s);
      su += u, suu += u * u;
    }
    for (std::size_t i = j; i < s.size(); ++i) {
      const double v = rf(s[i].sm_mhz) / s[i].time_s;
      sv += v, svv += v * v;
    }
    const Roofline r{sv / svv, su / suu, 0};
    const double res = max_rel_error(s, [&](double f) { return std::max(r.mem_s * rf(f), r.a_s_mhz / f); });
    // Both branches must be in the samples: the lowest clock on the 1/f branch, the highest on the flat one (the
    // kink between them).
    const double lo = s.front().sm_mhz, hi = s.back().sm_mhz;
    if (r.a_s_mhz / lo <= r.mem_s * rf(lo) || r.a_s_mhz / hi >= r.mem_s * rf(hi)) continue;
    if (res < best.residual) best = {r.mem_s, r.a_s_mhz, res};
  }
  return best;
}

// The dynamic power of activity 1 at clock f: P_dyn_max·s·(V/V_max)²·f/f_max (W), from the board model.
double unit_dynamic_w(const DvfsModel& board, double f) {
  const KernelCoefficients unit{.sm_share = 0, .mem_share = 0, .activity = 1, .mem_traffic = 0, .static_w = 0};
  return board.dynamic_power_w_at(f, 0, unit);
}

}  // namespace

FittedKernel fit_kernel(const std::vector<Sample>& samples, const DvfsModel& board, const FitOptions& opts) {
  check(samples);
  std::vector<Sample> s = samples;
  std::sort(s.begin(), s.end(), [](const Sample& a, const Sample& b) { return a.sm_mhz < b.sm_mhz; });
  for (std::size_t i = 1; i < s.size(); ++i)
    if (s[i].sm_mhz == s[i - 1].sm_mhz)
      throw std::invalid_argument("fit_kernel: SM clock " + std::to_string(s[i].sm_mhz) + " MHz appears twice");

  // Split uncapped / capped: the lower half (at least 2) sets the uncapped law; the first sample above that is
  // slower than the law by more than the tolerance starts the capped range.
  const std::size_t base = std::max<std::size_t>(2, (s.size() + 1) / 2);
  std::vector<Sample> uncapped(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(base));
  std::vector<Sample> capped;
  // Both laws take a time that falls or stays flat as the clock rises (A, T ≥ 0; r(f) is learnt from kernels
  // that follow them). A kernel whose time rises from one sample to the next by more than the measured scatter
  // follows neither, so the board's shape says nothing about it: r ≡ 1 (fit.hpp). The rise is the difference of
  // two measured times, each with the scatter kink_tolerance allows one sample: √2 of it.
  const double rise_tolerance = std::sqrt(2.0) * opts.kink_tolerance;
  bool rises = false;
  for (std::size_t i = 1; i < s.size(); ++i) rises |= s[i].time_s > s[i - 1].time_s * (1.0 + rise_tolerance);
  const TimeShape no_shape;
  const TimeShape& shape = rises ? no_shape : opts.time_shape;
  auto rf = [&](double f) { return shape.empty() ? 1.0 : shape.at(f); };
  const Line law0 = fit_time(uncapped, shape);
  for (std::size_t i = uncapped.size(); i < s.size(); ++i) {
    const double law_t = law0.c0 * rf(s[i].sm_mhz) + law0.c1 / s[i].sm_mhz;
    const bool near_limit = s[i].energy_j / s[i].time_s >= opts.cap_power_share * board.params().power_cap_w;
    if (!capped.empty() || (s[i].time_s > law_t * (1.0 + opts.cap_tolerance) && near_limit))
      capped.push_back(s[i]);
    else
      uncapped.push_back(s[i]);
  }

  FittedKernel k;
  k.time_shape = shape;
  k.time_rises = rises;
  const Line time = fit_time(uncapped, shape);
  k.clock_independent_s = time.c0;
  k.sm_scaled_s_mhz = time.c1;
  if (opts.roofline && uncapped.size() >= 3) {
    const Roofline r = fit_roofline(uncapped, shape);
    const double additive = max_rel_error(uncapped, [&](double f) { return time.c0 * rf(f) + time.c1 / f; });
    if (roofline_preferred(additive, r.residual, opts.kink_tolerance)) {
      k.time_law = TimeLaw::roofline;
      k.clock_independent_s = 0;
      k.sm_scaled_s_mhz = r.a_s_mhz;
      k.memory_bound_s = r.mem_s;
    }
  }

  // Power: P − P_idle(f) = P_k + activity·unit_dynamic(f) over the uncapped samples.
  std::vector<double> x, y;
  for (const auto& p : uncapped) {
    x.push_back(unit_dynamic_w(board, p.sm_mhz));
    y.push_back(p.energy_j / p.time_s - board.idle_power_w_at(p.sm_mhz));
  }
  Line power = fit_line(x, y);
  if (power.c1 < 0) {
    power.c1 = 0;
    power.c0 = 0;
    for (double v : y) power.c0 += v / static_cast<double>(y.size());
  }
  k.static_w = power.c0;
  const double unit_at_max = unit_dynamic_w(board, board.params().max_sm_mhz);
  k.dynamic_w_per_mhz = power.c1 * unit_at_max / board.params().max_sm_mhz;

  const Sample& r = uncapped.back();
  k.ref = {r.sm_mhz, r.mem_mhz};
  const double sm_s = k.sm_scaled_s_mhz / r.sm_mhz;
  const double r_ref = rf(r.sm_mhz);
  const double t_ref_s = k.time_law == TimeLaw::roofline ? std::max(k.memory_bound_s * r_ref, sm_s)
                                                         : k.clock_independent_s * r_ref + sm_s;
  k.t_ref_ns = t_ref_s * 1e9;
  // The local law at ref (roofline: all of the time scales with 1/f below the kink, none above it).
  k.coeffs.sm_share = k.time_law == TimeLaw::roofline ? (sm_s > k.memory_bound_s * r_ref ? 1.0 : 0.0) : sm_s / t_ref_s;
  k.coeffs.mem_share = 0;  // one memory clock in the sweep: its share is not observable
  k.coeffs.activity = power.c1;
  k.coeffs.mem_traffic = 0;  // memory power at this memory clock is inside static_w
  k.coeffs.static_w = power.c0;

  k.power = board.params();
  k.power.continuous_cap = true;
  if (!capped.empty()) {
    double sum = 0;
    for (const auto& p : capped) sum += p.energy_j / p.time_s, k.capped_sm_mhz.push_back(p.sm_mhz);
    k.cap_w = sum / static_cast<double>(capped.size());
  } else {
    // Nothing capped: the limit is at least the modelled power of every sample, so none is predicted capped.
    k.cap_w = board.params().power_cap_w;
    for (const auto& p : s)
      k.cap_w = std::max(k.cap_w, board.idle_power_w_at(p.sm_mhz) + power.c0 + power.c1 * unit_dynamic_w(board, p.sm_mhz));
  }
  k.power.power_cap_w = k.cap_w;
  return k;
}

Prediction predict(const DvfsModel& model, const FittedKernel& k, int sm_mhz) {
  Prediction p = model.predict(k.t_ref_ns, k.ref, {sm_mhz, k.ref.mem_mhz}, k.coeffs);
  const double f = p.effective_sm_mhz_avg;
  const double r = k.time_shape.empty() ? 1.0 : k.time_shape.at(f);
  if (k.time_law == TimeLaw::roofline) {
    p.time_ns = std::max(k.memory_bound_s * r, k.sm_scaled_s_mhz / f) * 1e9;
    p.energy_j = p.power_w * p.time_ns * 1e-9;
  } else if (!k.time_shape.empty()) {
    p.time_ns = (k.clock_independent_s * r + k.sm_scaled_s_mhz / f) * 1e9;
    p.energy_j = p.power_w * p.time_ns * 1e-9;
  }
  return p;
}

namespace {
// Σ squared relative power error of the per-kernel fits over the uncapped samples of `kernels` on `board`.
double power_fit_error(const std::vector<std::vector<Sample>>& kernels, const DvfsModel& board, const FitOptions& opts) {
  double err = 0;
  for (const auto& ks : kernels) {
    const FittedKernel k = fit_kernel(ks, board, opts);
    for (const auto& s : ks) {
      if (std::find(k.capped_sm_mhz.begin(), k.capped_sm_mhz.end(), s.sm_mhz) != k.capped_sm_mhz.end()) continue;
      const double model_w = board.idle_power_w_at(s.sm_mhz) + board.dynamic_power_w_at(s.sm_mhz, s.mem_mhz, k.coeffs);
      const double rel = model_w / (s.energy_j / s.time_s) - 1.0;
      err += rel * rel;
    }
  }
  return err;
}
}  // namespace

PowerParams fit_voltage_curve(const std::vector<std::vector<Sample>>& kernels, const DvfsModel& board,
                              const FitOptions& opts) {
  if (kernels.empty()) throw std::invalid_argument("fit_voltage_curve: no kernels");
  int lo = std::numeric_limits<int>::max(), hi = 0;
  for (const auto& ks : kernels)
    for (const auto& p : ks) lo = std::min(lo, p.sm_mhz), hi = std::max(hi, p.sm_mhz);
  PowerParams best = board.params();
  double best_err = std::numeric_limits<double>::infinity();
  for (int knee : board.spec().sm_clocks_mhz) {
    if (knee < lo || knee >= hi) continue;
    for (int v = 50; v <= 95; ++v) {
      PowerParams p = board.params();
      p.knee_mhz = knee;
      p.v_min_ratio = v / 100.0;
      const double err = power_fit_error(kernels, DvfsModel(board.spec(), p), opts);
      if (err < best_err) best_err = err, best = p;
    }
  }
  return best;
}


PowerParams fit_idle_line(const std::vector<std::vector<Sample>>& kernels, const DvfsModel& board, const FitOptions& opts) {
  if (kernels.empty()) throw std::invalid_argument("fit_idle_line: no kernels");
  const PowerParams base = board.params();
  PowerParams best = base;
  double best_err = power_fit_error(kernels, board, opts);
  for (int i = 10; i <= 30; ++i)
    for (int j = 10; j <= 30; ++j) {
      PowerParams p = base;
      p.idle_w_at_min_clock = base.idle_w_at_min_clock * i / 20.0;
      p.idle_w_at_max_clock = base.idle_w_at_max_clock * j / 20.0;
      const double err = power_fit_error(kernels, DvfsModel(board.spec(), p), opts);
      if (err < best_err) best_err = err, best = p;
    }
  return best;
}

double TimeShape::at(double f_mhz) const {
  if (sm_mhz.empty()) return 1.0;
  if (f_mhz <= sm_mhz.front()) return factor.front();
  if (f_mhz >= sm_mhz.back()) return factor.back();
  const auto hi = static_cast<std::size_t>(std::upper_bound(sm_mhz.begin(), sm_mhz.end(), f_mhz) - sm_mhz.begin());
  const double w = (f_mhz - sm_mhz[hi - 1]) / (sm_mhz[hi] - sm_mhz[hi - 1]);
  return factor[hi - 1] + w * (factor[hi] - factor[hi - 1]);
}

TimeShape fit_time_shape(const std::vector<std::vector<Sample>>& kernels) {
  if (kernels.empty()) throw std::invalid_argument("fit_time_shape: no kernels");
  std::vector<int> clocks;
  for (const auto& ks : kernels)
    for (const auto& p : ks) clocks.push_back(p.sm_mhz);
  std::sort(clocks.begin(), clocks.end());
  clocks.erase(std::unique(clocks.begin(), clocks.end()), clocks.end());
  if (clocks.size() < 2) throw std::invalid_argument("fit_time_shape: need 2 or more distinct SM clocks");
  auto index = [&](int f) {
    return static_cast<std::size_t>(std::lower_bound(clocks.begin(), clocks.end(), f) - clocks.begin());
  };
  std::vector<double> r(clocks.size(), 1.0);
  std::vector<double> tc(kernels.size()), a(kernels.size());
  for (int round = 0; round < 500; ++round) {
    // Per kernel: T, A ≥ 0 minimising Σ ((T·r + A/f)/t − 1)² given r.
    for (std::size_t k = 0; k < kernels.size(); ++k) {
      double rr = 0, rx = 0, xx = 0, ry = 0, xy = 0;
      for (const auto& p : kernels[k]) {
        const double w = 1.0 / (p.time_s * p.time_s), ri = r[index(p.sm_mhz)], x = 1.0 / p.sm_mhz;
        rr += w * ri * ri, rx += w * ri * x, xx += w * x * x, ry += w * ri * p.time_s, xy += w * x * p.time_s;
      }
      const double det = rr * xx - rx * rx;
      double t = det > 0 ? (ry * xx - xy * rx) / det : 0, s = det > 0 ? (rr * xy - rx * ry) / det : 0;
      if (!(det > 0) || s < 0)
        t = rr > 0 ? ry / rr : 0, s = 0;
      else if (t < 0)
        t = 0, s = xy / xx;
      tc[k] = t, a[k] = s;
    }
    // Per clock: r minimising the same error given every T, A; then r = 1 at the top clock (T absorbs the scale).
    std::vector<double> num(clocks.size(), 0), den(clocks.size(), 0);
    for (std::size_t k = 0; k < kernels.size(); ++k)
      for (const auto& p : kernels[k]) {
        const double w = 1.0 / (p.time_s * p.time_s);
        const std::size_t i = index(p.sm_mhz);
        num[i] += w * tc[k] * (p.time_s - a[k] / p.sm_mhz), den[i] += w * tc[k] * tc[k];
      }
    std::vector<double> next(clocks.size());
    for (std::size_t i = 0; i < clocks.size(); ++i) next[i] = den[i] > 0 ? num[i] / den[i] : r[i];
    const double top = next.back();
    if (!(top > 0)) break;  // no kernel with a clock-independent term at the top clock: r ≡ 1 is all there is
    for (double& v : next) v /= top;
    // The gauge: T·r + A/f is unchanged by r → (1 − μ)·r + μ·f_top/f (with T, A rescaled), so r is fixed by
    // r = 1 at the middle clock too (index n/2, as the interpolation split's); the shape then says how the
    // clock-independent term departs from the constant of T_c + A/f between those two clocks.
    const std::size_t mid = clocks.size() / 2;
    const double g = static_cast<double>(clocks.back()) / clocks[mid];
    if (mid + 1 < clocks.size() && std::abs(g - next[mid]) > 1e-12) {
      const double mu = (1 - next[mid]) / (g - next[mid]);
      for (std::size_t i = 0; i < clocks.size(); ++i)
        next[i] = (1 - mu) * next[i] + mu * static_cast<double>(clocks.back()) / clocks[i];
    }
    double moved = 0;
    for (std::size_t i = 0; i < clocks.size(); ++i) moved = std::max(moved, std::abs(next[i] - r[i]));
    r = std::move(next);
    if (moved < 1e-9) break;
  }
  return {clocks, r};
}

}  // namespace gearshift::model
