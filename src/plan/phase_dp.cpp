#include <algorithm>
#include <cstdint>
#include <limits>

#include "plan/strategies.hpp"

namespace gearshift::plan {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Tiny energy charged per change so that equal-cost plans prefer fewer changes, J.
constexpr double kChangePenaltyJ = 1e-9;

struct Back {
  std::int32_t from_pos = -1;  // -1: continued from position-1 at the same clock; else the change's position
  std::int32_t from_clock = -1;
};

struct DpResult {
  std::vector<std::size_t> requested;  // clock index requested per position
  double time_ns = 0, energy_j = 0;    // at the clocks that really run (old clocks inside windows)
  std::size_t end_clock = 0;
};

class PhaseDp {
 public:
  PhaseDp(const ClockTable& t, const model::Workload& w, double latency_ns)
      : t_(t), n_(t.ops), nc_(t.clocks.size()), window_end_(n_ + 1), prefix_((n_ + 1) * nc_),
        dp_((n_ + 1) * nc_), back_((n_ + 1) * nc_) {
    // A change issued before op i lands when the baseline timeline has advanced by L: ops in between still
    // run at the old clocks.
    for (std::size_t i = 0; i <= n_; ++i) {
      std::size_t k = i;
      if (i < n_ && latency_ns > 0) {
        double land = w.ops[i].start_offset_ns + latency_ns;
        while (k < n_ && w.ops[k].start_offset_ns < land) ++k;
      }
      window_end_[i] = k;
    }
  }

  // Minimise Σ (E + λ·T); start_clock < nc_ forces the clocks in effect at the step start and makes the plan
  // end on them too (the step repeats: no change is needed at the wrap).
  DpResult solve(double lambda, std::size_t start_clock) {
    for (std::size_t c = 0; c < nc_; ++c) prefix_[c] = 0;
    for (std::size_t i = 0; i < n_; ++i)
      for (std::size_t c = 0; c < nc_; ++c)
        prefix_[(i + 1) * nc_ + c] = prefix_[i * nc_ + c] + t_.energy(i, c) + lambda * t_.time(i, c);
    // back_ needs no reset: every finite dp cell gets its back pointer written in this solve.
    std::fill(dp_.begin(), dp_.end(), kInf);
    for (std::size_t c = 0; c < nc_; ++c)
      if (start_clock >= nc_ || c == start_clock) dp_[c] = 0;
    for (std::size_t i = 0; i <= n_; ++i) {
      double* row = &dp_[i * nc_];
      const std::size_t w = window_end_[i];
      if (i < n_ && w < n_) {
        // Best clocks to leave from: the window [i, w) still runs at them.
        double best = kInf;
        std::size_t arg = 0;
        for (std::size_t c = 0; c < nc_; ++c) {
          double v = row[c] + prefix_[w * nc_ + c] - prefix_[i * nc_ + c];
          if (v < best) best = v, arg = c;
        }
        if (best < kInf) {
          double* land = &dp_[w * nc_];
          Back* lb = &back_[w * nc_];
          for (std::size_t c = 0; c < nc_; ++c)
            if (c != arg && best + kChangePenaltyJ < land[c]) {
              land[c] = best + kChangePenaltyJ;
              lb[c] = Back{static_cast<std::int32_t>(i), static_cast<std::int32_t>(arg)};
            }
        }
      }
      if (i == n_) break;
      double* next = &dp_[(i + 1) * nc_];
      Back* nb = &back_[(i + 1) * nc_];
      const double* pi = &prefix_[i * nc_];
      const double* pn = &prefix_[(i + 1) * nc_];
      for (std::size_t c = 0; c < nc_; ++c) {
        double v = row[c] + (pn[c] - pi[c]);
        if (v < next[c]) next[c] = v, nb[c] = Back{};
      }
    }
    std::size_t c = 0;
    for (std::size_t k = 1; k < nc_; ++k)
      if (dp_[n_ * nc_ + k] < dp_[n_ * nc_ + c]) c = k;
    if (start_clock < nc_ && dp_[n_ * nc_ + start_clock] < kInf) c = start_clock;
    DpResult r;
    r.end_clock = c;
    r.requested.assign(n_, c);
    std::size_t i = n_;
    while (i > 0) {
      const Back& b = back_[i * nc_ + c];
      if (b.from_pos < 0) {
        r.requested[i - 1] = c;
        r.time_ns += t_.time(i - 1, c), r.energy_j += t_.energy(i - 1, c);
        --i;
      } else {
        auto j = static_cast<std::size_t>(b.from_pos);
        auto old = static_cast<std::size_t>(b.from_clock);
        for (std::size_t k = j; k < i; ++k) {
          r.requested[k] = c;  // requested from j on; runs at the old clocks until it lands at i
          r.time_ns += t_.time(k, old), r.energy_j += t_.energy(k, old);
        }
        i = j;
        c = old;
      }
    }
    return r;
  }

 private:
  const ClockTable& t_;
  std::size_t n_, nc_;
  std::vector<std::size_t> window_end_;
  std::vector<double> prefix_, dp_;
  std::vector<Back> back_;
};

}  // namespace

Schedule plan_phase(const ClockTable& t, const model::Workload& w, double budget, double latency_ns) {
  PhaseDp dp(t, w, latency_ns);
  const std::size_t free_start = t.clocks.size();
  // The step repeats: solve with free start clocks, then again forced to start and end on the clocks that
  // plan ends with. The time price λ is bracketed and bisected on that cyclic plan (T(λ) non-increasing).
  auto solve = [&](double lambda) { return dp.solve(lambda, dp.solve(lambda, free_start).end_clock); };
  DpResult r = solve(0);
  if (r.time_ns > budget) {
    double lo = 0, hi = 1e-8;
    DpResult at_hi = solve(hi);
    for (int k = 0; k < 60 && at_hi.time_ns > budget; ++k) lo = hi, hi *= 8, at_hi = solve(hi);
    for (int k = 0; k < 30 && hi - lo > 2e-2 * hi; ++k) {
      double mid = 0.5 * (lo + hi);
      DpResult m = solve(mid);
      if (m.time_ns <= budget) hi = mid, at_hi = m;
      else lo = mid;
    }
    r = at_hi;
  }
  Schedule s{"phase", latency_ns, {}, -1};
  for (std::size_t c : r.requested) s.clocks.push_back(t.clocks[c]);
  return s;
}

}  // namespace gearshift::plan
