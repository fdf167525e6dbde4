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

// Time law t = T_c + A/f over `s`, with the priors of fit.hpp (A ≥ 0, T_c ≥ 0).
Line fit_time(const std::vector<Sample>& s) {
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
Roofline fit_roofline(const std::vector<Sample>& s) {
  Roofline best;
  for (std::size_t j = 1; j < s.size(); ++j) {
    double su = 0, suu = 0, sv = 0, svv = 0;
    for (std::size_t i = 0; i < j; ++i) {
      const double u = 1.0 / (s[i].sm_mhz * s[i].time_s);
      su += u, suu += u * u;
    }
    for (std::size_t i = j; i < s.size(); ++i) sv += 1 / s[i].time_s, svv += 1 / (s[i].time_s * s[i].time_s);
    const Roofline r{sv / svv, su / suu, 0};
    const double res = max_rel_error(s, [&](double f) { return std::max(r.mem_s, r.a_s_mhz / f); });
    // Both branches must be in the samples: the kink between the lowest and the highest clock.
    const double kink = r.a_s_mhz / r.mem_s;
    if (kink <= s.front().sm_mhz || kink >= s.back().sm_mhz) continue;
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
  const Line law0 = fit_time(uncapped);
  for (std::size_t i = uncapped.size(); i < s.size(); ++i) {
    const double law_t = law0.c0 + law0.c1 / s[i].sm_mhz;
    const bool near_limit = s[i].energy_j / s[i].time_s >= opts.cap_power_share * board.params().power_cap_w;
    if (!capped.empty() || (s[i].time_s > law_t * (1.0 + opts.cap_tolerance) && near_limit))
      capped.push_back(s[i]);
    else
      uncapped.push_back(s[i]);
  }

  FittedKernel k;
  const Line time = fit_time(uncapped);
  k.clock_independent_s = time.c0;
  k.sm_scaled_s_mhz = time.c1;
  if (opts.roofline && uncapped.size() >= 3) {
    const Roofline r = fit_roofline(uncapped);
    const double additive = max_rel_error(uncapped, [&](double f) { return time.c0 + time.c1 / f; });
    if (additive > opts.kink_tolerance && r.residual < additive) {
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
  const double t_ref_s = k.time_law == TimeLaw::roofline ? std::max(k.memory_bound_s, sm_s) : k.clock_independent_s + sm_s;
  k.t_ref_ns = t_ref_s * 1e9;
  // The local law at ref (roofline: all of the time scales with 1/f below the kink, none above it).
  k.coeffs.sm_share = k.time_law == TimeLaw::roofline ? (sm_s > k.memory_bound_s ? 1.0 : 0.0) : sm_s / t_ref_s;
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
  if (k.time_law == TimeLaw::roofline) {
    p.time_ns = std::max(k.memory_bound_s, k.sm_scaled_s_mhz / p.effective_sm_mhz_avg) * 1e9;
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

}  // namespace gearshift::model
