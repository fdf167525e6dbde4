#include "verify/ladder.hpp"

#include <algorithm>
#include <cmath>

namespace gearshift::verify {

namespace {

// From `base` toward `target` linearly in 1/f by `alpha`, snapped up to a supported clock in [target, base].
int scaled(int base, int target, double alpha, const std::vector<int>& supported) {
  if (base <= 0 || target <= 0 || target >= base) return target;  // a raise or no change stays as planned
  const double inv = 1.0 / base + alpha * (1.0 / target - 1.0 / base);
  const double f = 1.0 / inv;
  int c = static_cast<int>(std::ceil(f - 1e-9));
  if (!supported.empty()) {
    auto it = std::lower_bound(supported.begin(), supported.end(), c);
    c = it == supported.end() ? base : *it;
  }
  return std::clamp(c, target, base);
}

}  // namespace

std::vector<model::ClockPair> Ladder::clocks_at(double alpha) const {
  alpha = std::clamp(alpha, 0.0, 1.0);
  std::vector<model::ClockPair> out;
  out.reserve(plan.size());
  for (const auto& p : plan) {
    if (alpha >= 1) {
      out.push_back(p);
      continue;
    }
    out.push_back({scaled(baseline.sm_mhz, p.sm_mhz, alpha, sm_clocks_mhz),
                   scaled(baseline.mem_mhz, p.mem_mhz, alpha, mem_clocks_mhz)});
  }
  return out;
}

double Ladder::shape(double alpha) const {
  const auto c = clocks_at(alpha);
  double w = 0, s = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const double d = i < duration_ns.size() ? duration_ns[i] : 0;
    w += d;
    if (c[i].sm_mhz > 0 && baseline.sm_mhz > 0) s += d * (static_cast<double>(baseline.sm_mhz) / c[i].sm_mhz - 1);
  }
  return w > 0 ? s / w : 0;
}

double Ladder::alpha_for_shape(double shape_limit) const {
  for (int k = 64; k > 0; --k) {
    const double a = k / 64.0;
    if (shape(a) <= shape_limit) return a;
  }
  return 0;
}

}  // namespace gearshift::verify
