#include "model/calibration_sweep.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

namespace gearshift::model {
namespace {

// Solves the n×n system (n ≤ 3) a x = b by Gaussian elimination with partial pivoting; false when singular.
bool solve(int n, double a[3][3], double b[3], double x[3]) {
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    if (std::abs(a[p][c]) < 1e-300) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (int r = c + 1; r < n; ++r) {
      const double m = a[r][c] / a[c][c];
      for (int k = c; k < n; ++k) a[r][k] -= m * a[c][k];
      b[r] -= m * b[c];
    }
  }
  for (int c = n - 1; c >= 0; --c) {
    double s = b[c];
    for (int k = c + 1; k < n; ++k) s -= a[c][k] * x[k];
    x[c] = s / a[c][c];
  }
  return true;
}

double det3(const double m[3][3]) {
  return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
         m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
}

}  // namespace

namespace {

// The three regressors of a sample over its time (rows weighted by 1/t: least squares on the relative error).
using Row = std::array<double, 3>;

// Least squares of Σ (c·row(s) − 1)² with every c ≥ 0: the best of the fits on the subsets `mask` (bit k: term k
// fitted) that `allowed` admits, all of whose coefficients come out ≥ 0. Returns false when none does.
template <class RowOf, class Allowed>
bool nonneg_fit(const std::vector<PairSample>& samples, RowOf&& row, Allowed&& allowed, double best[3]) {
  double best_sse = std::numeric_limits<double>::infinity();
  for (int mask = 1; mask < 8; ++mask) {
    if (!allowed(mask)) continue;
    int idx[3], n = 0;
    for (int k = 0; k < 3; ++k)
      if (mask & (1 << k)) idx[n++] = k;
    double a[3][3] = {}, b[3] = {}, x[3] = {};
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const Row r = row(i);
      for (int p = 0; p < n; ++p) {
        for (int q = 0; q < n; ++q) a[p][q] += r[idx[p]] * r[idx[q]];
        b[p] += r[idx[p]];  // target: t/t = 1
      }
    }
    if (!solve(n, a, b, x)) continue;
    if (std::any_of(x, x + n, [](double v) { return v < 0; })) continue;
    double c[3] = {0, 0, 0};
    for (int p = 0; p < n; ++p) c[idx[p]] = x[p];
    double sse = 0;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const Row r = row(i);
      const double e = c[0] * r[0] + c[1] * r[1] + c[2] * r[2] - 1;
      sse += e * e;
    }
    if (sse < best_sse) best_sse = sse, std::copy(c, c + 3, best);
  }
  return std::isfinite(best_sse);
}

// The time of a sample by law `law` with coefficients c = {T_c, A, B}, ns.
double law_time(TimeLaw law, const double c[3], const PairSample& s) {
  const double sm = c[1] / s.clocks.sm_mhz, mem = c[2] / s.clocks.mem_mhz;
  return law == TimeLaw::roofline ? c[0] + std::max(sm, mem) : c[0] + sm + mem;
}

struct LawFit {
  double c[3] = {0, 0, 0};
  double max_err = std::numeric_limits<double>::infinity(), sse = 0;
};

LawFit errors_of(TimeLaw law, const double c[3], const std::vector<PairSample>& samples) {
  LawFit f;
  std::copy(c, c + 3, f.c);
  f.max_err = 0;
  for (const auto& s : samples) {
    const double e = law_time(law, c, s) / s.time_ns - 1;
    f.max_err = std::max(f.max_err, std::abs(e)), f.sse += e * e;
  }
  return f;
}

// T_c + max(A/f, B/m): the samples ordered by f/m (the SM-bound ones have the lower f/m), for each split with
// samples on both sides the relative least squares of T_c + A/f on the lower part and T_c + B/m on the upper
// one (shared T_c; A, B > 0), evaluated as the max (a kink outside its split pays for it); kept only when the
// law has a sample strictly on each side of its kink. The split whose law misses its samples least (largest
// relative error), as fit.cpp's one-clock roofline does.
LawFit fit_roofline_pairs(std::vector<PairSample> s) {
  std::sort(s.begin(), s.end(), [](const PairSample& x, const PairSample& y) {
    return static_cast<double>(x.clocks.sm_mhz) / x.clocks.mem_mhz < static_cast<double>(y.clocks.sm_mhz) / y.clocks.mem_mhz;
  });
  LawFit best;
  for (std::size_t j = 1; j < s.size(); ++j) {
    double c[3];
    auto row = [&](std::size_t i) {
      const double t = s[i].time_ns;
      return Row{1.0 / t, i < j ? 1.0 / s[i].clocks.sm_mhz / t : 0.0, i < j ? 0.0 : 1.0 / s[i].clocks.mem_mhz / t};
    };
    if (!nonneg_fit(s, row, [](int mask) { return (mask & 6) == 6; }, c)) continue;
    if (!(c[1] > 0 && c[2] > 0)) continue;
    bool sm_side = false, mem_side = false;
    for (const auto& p : s) {
      const double sm = c[1] / p.clocks.sm_mhz, mem = c[2] / p.clocks.mem_mhz;
      sm_side |= sm > mem, mem_side |= mem > sm;
    }
    if (!sm_side || !mem_side) continue;
    const LawFit f = errors_of(TimeLaw::roofline, c, s);
    if (f.max_err < best.max_err) best = f;
  }
  return best;
}

}  // namespace

TimeFit fit_time_pairs(const std::vector<PairSample>& samples, ClockPair ref, double kink_tolerance) {
  if (samples.size() < 3)
    throw std::invalid_argument("fit_time_pairs: need at least 3 samples, got " + std::to_string(samples.size()));
  std::set<int> fs, ms;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    if (s.clocks.sm_mhz <= 0 || s.clocks.mem_mhz <= 0 || !std::isfinite(s.time_ns) || s.time_ns <= 0)
      throw std::invalid_argument("fit_time_pairs: sample " + std::to_string(i) +
                                  ": clocks must be > 0 MHz and the time finite and > 0 ns");
    fs.insert(s.clocks.sm_mhz), ms.insert(s.clocks.mem_mhz);
  }
  if (fs.size() < 2) throw std::invalid_argument("fit_time_pairs: need samples at 2 or more distinct SM clocks");
  if (ref.sm_mhz <= 0 || ref.mem_mhz <= 0) throw std::invalid_argument("fit_time_pairs: reference clocks must be > 0");
  auto row = [&](std::size_t i) {
    const PairSample& s = samples[i];
    return Row{1.0 / s.time_ns, 1.0 / s.clocks.sm_mhz / s.time_ns, 1.0 / s.clocks.mem_mhz / s.time_ns};
  };
  double c[3] = {0, 0, 0};
  nonneg_fit(samples, row, [&](int mask) { return !(mask & 4) || ms.size() >= 2; }, c);  // B needs two memory clocks
  LawFit chosen = errors_of(TimeLaw::additive, c, samples);
  TimeLaw law = TimeLaw::additive;
  // The roofline has 3 parameters: only with a 4th sample can the samples tell it from the additive law.
  if (samples.size() >= 4 && ms.size() >= 2) {
    const LawFit r = fit_roofline_pairs(samples);
    if (roofline_preferred(chosen.max_err, r.max_err, kink_tolerance)) chosen = r, law = TimeLaw::roofline;
  }
  TimeFit f;
  f.law = law;
  f.clock_independent_ns = chosen.c[0], f.sm_scaled_ns_mhz = chosen.c[1], f.mem_scaled_ns_mhz = chosen.c[2];
  f.ref = ref;
  const PairSample at_ref{ref, 1};
  f.t_ref_ns = law_time(law, chosen.c, at_ref);
  f.sm_share = chosen.c[1] / ref.sm_mhz / f.t_ref_ns;
  f.mem_share = chosen.c[2] / ref.mem_mhz / f.t_ref_ns;
  f.rms_relative_error = std::sqrt(chosen.sse / static_cast<double>(samples.size()));
  f.max_relative_error = chosen.max_err;
  return f;
}

std::vector<ClockPair> calibration_pairs(const gpu::GpuSpec& spec, int min_sm_mhz, int count) {
  if (count < 1) throw std::invalid_argument("calibration_pairs: count must be >= 1");
  std::vector<ClockPair> cand;
  for (int f : spec.sm_clocks_mhz)
    if (f >= min_sm_mhz)
      for (int m : spec.mem_clocks_mhz) cand.push_back({f, m});
  if (cand.empty())
    throw std::invalid_argument("calibration_pairs: no SM clock of " + spec.name + " at or above " +
                                std::to_string(min_sm_mhz) + " MHz");
  const double fd = spec.default_sm_clock_mhz, md = spec.default_mem_clock_mhz;
  auto x_of = [&](ClockPair c, double x[3]) {
    x[0] = 1, x[1] = fd / c.sm_mhz, x[2] = md / c.mem_mhz;
  };
  double m[3][3] = {{1e-6, 0, 0}, {0, 1e-6, 0}, {0, 0, 1e-6}};  // ridge: det grows from the first pair on
  std::vector<ClockPair> out;
  auto add = [&](ClockPair c) {
    double x[3];
    x_of(c, x);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) m[i][j] += x[i] * x[j];
    out.push_back(c);
    cand.erase(std::remove(cand.begin(), cand.end(), c), cand.end());
  };
  add({spec.default_sm_clock_mhz, spec.default_mem_clock_mhz});
  while (static_cast<int>(out.size()) < count && !cand.empty()) {
    const double d0 = det3(m);
    double best = -1;
    ClockPair pick = cand.front();
    for (const auto& c : cand) {
      double x[3], t[3][3];
      x_of(c, x);
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) t[i][j] = m[i][j] + x[i] * x[j];
      const double gain = std::log(det3(t) / d0) / (fd / c.sm_mhz);  // per unit of sweep time
      if (gain > best) best = gain, pick = c;
    }
    add(pick);
  }
  return out;
}

}  // namespace gearshift::model
