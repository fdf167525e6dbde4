#include "verify/step_cycle.hpp"

#include <algorithm>

#include <fmt/core.h>

namespace gearshift::verify {

double StepCycle::share(const std::vector<double>& steps, std::size_t p) {
  const std::size_t n = steps.size();
  if (p < 2 || n < p) return 0;
  double mean = 0;
  for (double s : steps) mean += s;
  mean /= static_cast<double>(n);
  std::vector<double> sum(p, 0);
  std::vector<std::size_t> count(p, 0);
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sum[i % p] += steps[i];
    ++count[i % p];
    total += (steps[i] - mean) * (steps[i] - mean);
  }
  if (!(total > 0)) return 0;
  double between = 0;
  for (std::size_t k = 0; k < p; ++k) {
    const double m = sum[k] / static_cast<double>(count[k]);
    between += static_cast<double>(count[k]) * (m - mean) * (m - mean);
  }
  return between / total;
}

void StepCycle::add(double step_s, std::size_t block) {
  if (max_period_ < 2 || !(step_s > 0)) return;
  if (steps_.size() == kWindow) steps_.erase(steps_.begin()), blocks_.erase(blocks_.begin());
  steps_.push_back(step_s);
  blocks_.push_back(block);
  ++seen_;
  // Every 8 steps over the first 1,024, then every 256 (a cycle that shows only later is still found; a long
  // run without one costs little).
  if (period_ == 0 && seen_ % (seen_ <= 1024 ? 8 : 256) == 0) look();
}

void StepCycle::look() {
  const std::size_t n = steps_.size();
  if (n < kMinSteps) return;
  // Each step over its block's mean step (blocks are consecutive runs of the same number).
  std::vector<double> rel(n);
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    double sum = 0;
    for (; j < n && blocks_[j] == blocks_[i]; ++j) sum += steps_[j];
    const double mean = sum / static_cast<double>(j - i);
    for (std::size_t k = i; k < j; ++k) rel[k] = steps_[k] / mean;
    i = j;
  }
  std::vector<double> shares(max_period_ + 1, 0);
  double best = 0;
  for (std::size_t p = 2; p <= max_period_ && p * kMinCycles <= n; ++p) {
    shares[p] = share(rel, p);
    best = std::max(best, shares[p]);
  }
  if (best < kMinShare) return;
  for (std::size_t p = 2; p <= max_period_; ++p) {
    if (shares[p] < kNearBest * best) continue;
    period_ = p;
    // The cycle's slowest place against the median step, for the summary.
    std::vector<double> sorted = steps_;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(n / 2), sorted.end());
    const double median = sorted[n / 2];
    std::vector<double> sum(p, 0);
    std::vector<std::size_t> count(p, 0);
    for (std::size_t i = 0; i < n; ++i) sum[i % p] += steps_[i], ++count[i % p];
    double slowest = 0;
    for (std::size_t k = 0; k < p; ++k) slowest = std::max(slowest, sum[k] / static_cast<double>(count[k]));
    why_ = fmt::format("the job's steps run in a cycle of {} (its slowest step {:.2f}x the median {:.1f} ms; the "
                       "cycle explains {:.0f} % of the step-time variance over {} steps): blocks span an even number of whole cycles",
                       p, slowest / median, median * 1e3, 100 * shares[p], n);
    return;
  }
}

}  // namespace gearshift::verify
