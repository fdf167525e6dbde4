// Candidate steps from the kernel stream's period: the best-matching period of the main stream's op names,
// where a step starts within it, and the step starts found by the step's first ops (its signature).
#include "trace/step/detector.hpp"

#include <algorithm>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

namespace gearshift::trace::step_detail {

Detector::Cut Detector::cut_by_period() const {
  Cut c;
  c.method = "kernel-stream period";
  c.p = find_period(c.score);
  c.bounds = bounds_for_period(c.p);
  return c;
}

std::vector<std::size_t> Detector::bounds_for_period(std::size_t p) const {
  std::size_t o = best_offset(p);
  // Ops right at a step boundary (data copies, one-off memsets) are the least stable: when the step's
  // first ops do not repeat, start the signature a little later.
  const std::size_t expected = seq_.size() / p;
  std::vector<std::size_t> bounds, most;  // most: the signature found most often (warm-up ops lower `expected`)
  for (std::size_t d = 0; d <= std::max<std::size_t>(16, p / 10) && d < p; ++d) {
    bounds = signature_bounds(o + d, p);
    if (bounds.size() + 1 >= expected && bounds.size() >= 2) break;
    if (bounds.size() > most.size()) most = bounds;
  }
  if (bounds.size() + 1 < expected && most.size() > bounds.size()) bounds = std::move(most);
  if (bounds.size() < 2)
    throw NoIterationError(fmt::format("found a period of {} ops but no step start that repeats", p));
  return snap_to_launch_units(bounds);
}

// A step cannot start inside a CUDA graph launch (the runtime sees the launch as one unit): a bound on a
// graph op moves back to its launch's first op on the main stream.
std::vector<std::size_t> Detector::snap_to_launch_units(std::vector<std::size_t> bounds) const {
  for (auto& b : bounds)
    while (b > 0 && b < main_.size() && op(b).graph_id != 0 && op(b - 1).graph_id != 0 &&
           op(b - 1).correlation == op(b).correlation)
      --b;
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  return bounds;
}

double Detector::match(std::size_t p) const {
  const std::size_t n = seq_.size();
  std::size_t hits = 0;
  for (std::size_t i = 0; i + p < n; ++i) hits += seq_[i] == seq_[i + p];
  return static_cast<double>(hits) / static_cast<double>(n - p);
}

// Positions of every op that occurs at least twice on the main stream, the rarest ops first (an op that
// occurs once per step gives the step's length).
std::vector<std::vector<std::size_t>> Detector::occurrences_by_rarity() const {
  std::unordered_map<std::uint32_t, std::vector<std::size_t>> pos;
  for (std::size_t i = 0; i < seq_.size(); ++i) pos[seq_[i]].push_back(i);
  std::vector<std::vector<std::size_t>> by_count;
  for (auto& [sym, v] : pos)
    if (v.size() >= 2) by_count.push_back(std::move(v));
  std::sort(by_count.begin(), by_count.end(), [](const auto& x, const auto& y) {
    return x.size() != y.size() ? x.size() < y.size() : x.front() < y.front();
  });
  return by_count;
}

std::size_t Detector::find_period(double& score) const {
  const std::size_t n = seq_.size();
  if (n < 4) throw NoIterationError(fmt::format("only {} ops on the busiest stream: too few to hold 2 steps", n));
  const auto by_count = occurrences_by_rarity();
  std::set<std::size_t> cands;
  for (const auto& v : by_count) {
    for (std::size_t k = 0; k + 1 < v.size(); ++k) {
      std::size_t d = v[k + 1] - v[k];
      if (d >= 1 && 2 * d <= n) cands.insert(d);
    }
    if (cands.size() >= opt_.max_candidates) break;
  }
  if (cands.empty()) throw NoIterationError("no op repeats within the trace: no iteration to find");
  std::vector<std::pair<std::size_t, double>> scored;
  double best = 0;
  for (std::size_t p : cands) {
    double m = match(p);
    scored.emplace_back(p, m);
    best = std::max(best, m);
  }
  if (best < 0.5)
    throw NoIterationError(fmt::format("no repeating op sequence: the best period matched {:.0f} % of ops; the "
                                       "trace needs at least 2 complete training steps",
                                       100 * best));
  for (auto [p, m] : scored)  // ascending p: the smallest near-best period (multiples score as well)
    if (m >= best - 0.01) {
      score = m;
      return p;
    }
  return scored.back().first;
}

// Where a step starts within the period. A training step ends with the optimizer: the boundary goes right
// after the last optimizer kernel of the period (the block followed by the longest idle gap when there are
// several). Without optimizer kernels: at the trace start when it holds whole periods (profilers start
// recording at a step boundary), else where the GPU idles longest between repeats.
std::size_t Detector::best_offset(std::size_t p) const {
  const std::size_t n = seq_.size();
  std::vector<double> gap(n, 0);
  std::int64_t prev_end = op(0).end_ns();
  for (std::size_t i = 1; i < n; ++i) {
    gap[i] = static_cast<double>(op(i).start_ns - prev_end);
    prev_end = std::max(prev_end, op(i).end_ns());
  }
  auto mean_gap = [&](std::size_t o) {
    double s = 0;
    int c = 0;
    for (std::size_t i = o; i < n; i += p)
      if (i > 0) s += gap[i], ++c;
    return c ? s / c : -1e300;
  };
  // The reference period: the window that best matches the next one (the first steps are often warm-up).
  std::size_t r = 0, r_hits = 0;
  for (std::size_t w = 0; w + 2 * p <= n; w += p) {
    std::size_t hits = 0;
    for (std::size_t j = 0; j < p; ++j) hits += seq_[w + j] == seq_[w + p + j];
    if (hits > r_hits) r_hits = hits, r = w;
  }
  // Positions of the reference period that end an optimizer block.
  std::vector<std::size_t> ends;
  for (std::size_t j = r; j < r + p; ++j) {
    if (is_optimizer(trace_.names[seq_[j]]) && !is_optimizer(trace_.names[seq_[j + 1]])) ends.push_back(j + 1);
  }
  if (!ends.empty()) {
    std::size_t best_o = ends.front();
    double best = -1e300;
    for (std::size_t o : ends) {
      double g = mean_gap(o);
      if (g > best) best = g, best_o = o;
    }
    return best_o;
  }
  std::size_t rem = n % p;
  if (rem * 50 <= p) return 0;
  std::size_t best_o = r;
  double best = -1e300;
  for (std::size_t o = r; o < r + p; ++o) {
    double mean = mean_gap(o);
    if (mean > best + 1e-9) best = mean, best_o = o;
  }
  return best_o;
}

// Step starts: occurrences of the step's first ops (its signature), each the one nearest a period after the
// previous start, so that a repeat of those ops inside a step is not taken for a new step.
std::vector<std::size_t> Detector::signature_bounds(std::size_t o, std::size_t p) const {
  const std::size_t n = seq_.size();
  const std::size_t k = std::clamp<std::size_t>(p / 4, 1, 8);
  std::vector<std::size_t> hits;
  for (std::size_t i = 0; i + k <= n; ++i)
    if (std::equal(seq_.begin() + static_cast<std::ptrdiff_t>(i), seq_.begin() + static_cast<std::ptrdiff_t>(i + k),
                   seq_.begin() + static_cast<std::ptrdiff_t>(o)))
      hits.push_back(i);
  std::vector<std::size_t> b;
  if (hits.empty()) return b;
  b.push_back(hits.front());
  for (;;) {
    const std::size_t expect = b.back() + p;
    std::size_t best = n;
    for (std::size_t h : hits) {
      if (h <= b.back() + p / 2) continue;
      auto dist = [&](std::size_t x) { return x > expect ? x - expect : expect - x; };
      if (best == n || dist(h) < dist(best)) best = h;
      if (h > expect + p) break;
    }
    if (best == n) break;
    b.push_back(best);
  }
  return b;
}

}  // namespace gearshift::trace::step_detail
