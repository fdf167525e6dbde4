#include "model/calibration_sweep.hpp"

#include <algorithm>
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

TimeFit fit_time_pairs(const std::vector<PairSample>& samples, ClockPair ref) {
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
  // Rows weighted by 1/t: least squares on the relative error.
  auto row = [](const PairSample& s, double out[3]) {
    out[0] = 1.0 / s.time_ns;
    out[1] = 1.0 / s.clocks.sm_mhz / s.time_ns;
    out[2] = 1.0 / s.clocks.mem_mhz / s.time_ns;
  };
  double best_sse = std::numeric_limits<double>::infinity(), best[3] = {0, 0, 0};
  for (int mask = 1; mask < 8; ++mask) {
    if ((mask & 4) && ms.size() < 2) continue;  // B needs two memory clocks
    int idx[3], n = 0;
    for (int k = 0; k < 3; ++k)
      if (mask & (1 << k)) idx[n++] = k;
    double a[3][3] = {}, b[3] = {}, x[3] = {};
    for (const auto& s : samples) {
      double r[3];
      row(s, r);
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) a[i][j] += r[idx[i]] * r[idx[j]];
        b[i] += r[idx[i]];  // target: t/t = 1
      }
    }
    if (!solve(n, a, b, x)) continue;
    if (std::any_of(x, x + n, [](double v) { return v < 0; })) continue;
    double c[3] = {0, 0, 0};
    for (int i = 0; i < n; ++i) c[idx[i]] = x[i];
    double sse = 0;
    for (const auto& s : samples) {
      double r[3];
      row(s, r);
      const double e = c[0] * r[0] + c[1] * r[1] + c[2] * r[2] - 1;
      sse += e * e;
    }
    if (sse < best_sse) best_sse = sse, std::copy(c, c + 3, best);
  }
  TimeFit f;
  f.clock_independent_ns = best[0], f.sm_scaled_ns_mhz = best[1], f.mem_scaled_ns_mhz = best[2];
  f.ref = ref;
  f.t_ref_ns = best[0] + best[1] / ref.sm_mhz + best[2] / ref.mem_mhz;
  f.sm_share = best[1] / ref.sm_mhz / f.t_ref_ns;
  f.mem_share = best[2] / ref.mem_mhz / f.t_ref_ns;
  f.rms_relative_error = std::sqrt(best_sse / static_cast<double>(samples.size()));
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
