#include "monitor/energy.hpp"

#include <cmath>
#include <limits>

namespace gearshift::monitor {

std::uint64_t CounterUnwrapper::add(std::uint64_t raw_mj) {
  if (!has_) {
    has_ = true;
    last_raw_ = raw_mj;
    return total_;
  }
  std::uint64_t delta;
  if (raw_mj >= last_raw_) {
    delta = raw_mj - last_raw_;
  } else {
    ++wraps_;
    constexpr std::uint64_t k32 = std::uint64_t{1} << 32;
    // Unsigned arithmetic: modulus − last + raw, with 2^64 implied by wraparound of uint64_t.
    delta = last_raw_ < k32 ? (k32 - last_raw_) + raw_mj : raw_mj - last_raw_;
  }
  last_raw_ = raw_mj;
  total_ += delta;
  return total_;
}

std::optional<Tick> detect_tick(const CounterRead& prev, const CounterRead& cur) {
  if (cur.cumulative_mj == prev.cumulative_mj) return std::nullopt;
  return Tick{prev.t_start, cur.t_end, cur.cumulative_mj};
}

double energy_at(const Tick& tick, double mean_power_w, Ns t) {
  // W × ns = 1e-6 mJ
  return static_cast<double>(tick.cumulative_mj) - mean_power_w * static_cast<double>(tick.time() - t) * 1e-6;
}

void PowerIntegrator::add(Ns t, double watts) {
  double integral = 0;
  if (!points_.empty()) {
    const PowerPoint& p = points_.back();
    if (t < p.t) return;  // out of order: drop rather than corrupt the integral
    integral = p.integral_j + 0.5 * (p.watts + watts) * static_cast<double>(t - p.t) * 1e-9;
  }
  points_.push_back({t, watts, integral});
  while (points_.size() > keep_) points_.pop_front();
}

std::optional<double> PowerIntegrator::integral_at(Ns t) const {
  if (points_.empty()) return std::nullopt;
  const PowerPoint& first = points_.front();
  const PowerPoint& last = points_.back();
  if (t <= first.t) return first.integral_j - first.watts * static_cast<double>(first.t - t) * 1e-9;
  if (t >= last.t) return last.integral_j + last.watts * static_cast<double>(t - last.t) * 1e-9;
  // Binary search for the segment [a, b] holding t; power is linear on it, so its integral is quadratic.
  std::size_t lo = 0, hi = points_.size() - 1;
  while (hi - lo > 1) {
    std::size_t mid = (lo + hi) / 2;
    (points_[mid].t <= t ? lo : hi) = mid;
  }
  const PowerPoint& a = points_[lo];
  const PowerPoint& b = points_[hi];
  double span = static_cast<double>(b.t - a.t);
  double x = static_cast<double>(t - a.t);
  double p_t = a.watts + (b.watts - a.watts) * (span > 0 ? x / span : 0);
  return a.integral_j + 0.5 * (a.watts + p_t) * x * 1e-9;
}

std::optional<double> PowerIntegrator::mean_power(Ns a, Ns b) const {
  if (points_.empty()) return std::nullopt;
  double sum = 0;
  int n = 0;
  const PowerPoint* nearest = &points_.front();
  Ns best = std::numeric_limits<Ns>::max();
  for (const auto& p : points_) {
    if (p.t >= a && p.t <= b) {
      sum += p.watts;
      ++n;
    }
    Ns d = p.t > a ? p.t - a : a - p.t;
    if (d < best) {
      best = d;
      nearest = &p;
    }
  }
  return n ? sum / n : nearest->watts;
}

}  // namespace gearshift::monitor
