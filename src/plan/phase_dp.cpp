#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>

#include "plan/strategies.hpp"

namespace gearshift::plan {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Energy charged per change, as a share of the step's energy at the default clocks: a change must save more
// than that to be made. A change is a risk the model does not price (it may land late), so one that gains next
// to nothing is not worth it: on the shipped GPT-3 XL trace at L = 1 ms the plan saved 1.79 % with 36 changes
// per step, and saves 1.79 % with 5 with this charge (at 10 µs, 636 changes of about 0.0005 % each gave 0.3 pp
// more; they are dropped). Also makes equal-cost plans prefer fewer changes.
constexpr double kChangePenaltyShare = 1e-5;

// min of v[from, to): four independent running minima (a single one is a chain of dependent compares).
double min_of(const double* v, std::size_t from, std::size_t to) {
  double m0 = kInf, m1 = kInf, m2 = kInf, m3 = kInf;
  std::size_t c = from;
  for (; c + 4 <= to; c += 4) {
    m0 = std::min(m0, v[c]);
    m1 = std::min(m1, v[c + 1]);
    m2 = std::min(m2, v[c + 2]);
    m3 = std::min(m3, v[c + 3]);
  }
  for (; c < to; ++c) m0 = std::min(m0, v[c]);
  return std::min(std::min(m0, m1), std::min(m2, m3));
}

// min_of's value and the first index holding it, in one pass for the backtracking sweep: four lanes, each keeping
// its least value and where it first held it; of the lanes holding the least, the smallest index.
double min_and_first(const double* v, std::size_t width, std::size_t& first) {
  double m[4] = {kInf, kInf, kInf, kInf};
  std::size_t at[4] = {0, 1, 2, 3};
  std::size_t c = 0;
  for (; c + 4 <= width; c += 4)
    for (std::size_t l = 0; l < 4; ++l)
      if (v[c + l] < m[l]) m[l] = v[c + l], at[l] = c + l;
  for (; c < width; ++c)
    if (v[c] < m[0]) m[0] = v[c], at[0] = c;
  const double least = std::min(std::min(m[0], m[1]), std::min(m[2], m[3]));
  first = width;
  for (std::size_t l = 0; l < 4; ++l)
    if (m[l] == least) first = std::min(first, at[l]);
  return least;
}

}  // namespace

// Dynamic programming over positions × clock pairs (the simulator's semantics, sim/simulator.hpp): a phase
// starting at position i (its change landing as op i starts, issued L before) keeps its clocks at least until
// the table's fastest timeline has advanced by L, so that the next change, issued L before it lands, is issued
// after this one landed, under any clocks (on one stream; the simulator counts any change that is late). dp[i][c] = least Σ (E + λ·T) of positions [0, i) with clocks c in effect
// at i and free to change there.
struct PhasePlanner::Impl {
  const ClockTable& t;
  std::size_t n, nc;
  std::vector<std::size_t> window_end;  // first position a phase landing at i may end at; n + 1: none
  std::vector<std::size_t> lands_from;  // [k]: first i with window_end[i] >= k (those == k land at k)
  // Rows of prefix kept at once: the sweep at row k reads those from the earliest phase start landing at k + 1.
  // A ring of that many rows instead of all n + 1: short latencies keep it in cache.
  std::size_t prefix_rows = 0, ring_mask = 0;
  std::vector<double> best;          // per position a phase may land at: the least dp value to leave from
  std::vector<std::size_t> best_at;  // per such position: the first clock index with that value (backtracking)
  std::map<double, Result> solved;   // λ -> the cyclic plan for it
  double change_penalty_j = 1e-9;    // kChangePenaltyShare of the step at the default clocks, J
  PhaseScratch own_scratch;          // used when no shared scratch is given
  PhaseScratch& scratch;

  Impl(const ClockTable& table, double latency_ns, PhaseScratch* shared)
      : t(table), n(table.ops), nc(table.clocks.size()), window_end(n + 1, n + 1), lands_from(n + 2, 0),
        best(n + 1), best_at(n + 1), scratch(shared ? *shared : own_scratch) {
    double step_j = 0;
    for (std::size_t i = 0; i < n && t.default_index < nc; ++i) step_j += t.energy(i, t.default_index);
    if (step_j > 0) change_penalty_j = std::max(change_penalty_j, kChangePenaltyShare * step_j);
    const auto& s = t.fastest_start_ns;
    std::size_t k = 0;
    for (std::size_t i = 0; i < n; ++i) {
      // Positions are in start order, so the first one at least L later only moves forward with i.
      k = std::max(k, i + 1);
      while (k < n && s[k] < s[i] + latency_ns) ++k;
      // The last phase runs into the next step's first (same clocks, the step repeats): it must last L by the
      // step's end, so that the next step's first change is issued after it landed.
      if (k < n) window_end[i] = k;
      else if (s[i] + latency_ns <= t.fastest_step_ns) window_end[i] = n;
    }
    // window_end does not decrease with i, so the positions landing at k form one run [lands_from[k], ...).
    std::size_t i = 0;
    for (std::size_t kk = 0; kk <= n + 1; ++kk) {
      while (i < n && window_end[i] < kk) ++i;
      lands_from[kk] = i;
    }
    // lands_from[kk] < kk for kk >= 1 (window_end[kk - 1] >= kk), so this is at least 2.
    prefix_rows = 2;
    for (std::size_t kk = 1; kk <= n; ++kk) prefix_rows = std::max(prefix_rows, kk - lands_from[kk] + 1);
    // A power of two, so that a row's place is its index masked, not divided; all n + 1 rows (no ring, the
    // mask all ones) where that would be as many.
    prefix_rows = std::bit_ceil(prefix_rows);
    ring_mask = prefix_rows - 1;
    if (prefix_rows >= n + 1) prefix_rows = n + 1, ring_mask = ~std::size_t{0};
  }

  // The plan minimising Σ (E + λ·T); start_clock < nc forces the clocks in effect at the step start and makes
  // the plan end on them (no change at the wrap). Without `backtrack` only end_clock is set.
  //
  // dp is kept two rows at a time: instead of the whole table, the sweep records per cell how it was reached
  // (came_from: 0 continued, j + 1 a phase that landed there from j, the first of the cheapest, as a backtrack
  // over the whole table chose) and per position the clocks its phases leave from (best_at). The sums are the
  // same, in the same order; it only touches less memory.
  Result solve_once(double lambda, std::size_t start_clock, bool backtrack) {
    // Local copies: the compiler cannot tell that the stores through the scratch leave them unchanged.
    const std::size_t ops = n, width = nc;
    const double* budget = t.budget_data();
    const std::size_t ring = ring_mask;
    if (scratch.prefix.size() < prefix_rows * width) scratch.prefix.resize(prefix_rows * width);
    if (scratch.rows.size() < 2 * width) scratch.rows.resize(2 * width);
    if (backtrack && scratch.came_from.size() < ops * width) scratch.came_from.resize(ops * width);
    double* prefix = scratch.prefix.data();
    double* dp = scratch.rows.data();
    std::uint32_t* came_from = scratch.came_from.data();
    for (std::size_t c = 0; c < width; ++c) prefix[c] = 0;
    for (std::size_t c = 0; c < width; ++c) dp[c] = start_clock >= width || c == start_clock ? 0 : kInf;
    // One sweep: each row's table entries are touched once.
    for (std::size_t k = 0; k < ops; ++k) {
      // Row k is final: where a phase may land at k, the cheapest clocks to leave from. (Landing on those very
      // clocks is never cheaper than continuing on them, so that min serves every target clock.)
      const double* __restrict row = &dp[(k & 1) * width];
      if (window_end[k] <= ops) {
        if (!t.may_change.empty() && !t.may_change[k]) best[k] = kInf;
        else if (!backtrack) best[k] = min_of(row, 0, width);
        else best[k] = min_and_first(row, width, best_at[k]);  // the same value as min_of
      }
      // Row k+1: continue at the same clocks, or the end of the hold of a phase that landed earlier.
      const double* __restrict e = &t.energy_j[k * width];
      const double* __restrict b = budget + k * width;
      const double* __restrict pk = &prefix[(k & ring) * width];
      double* __restrict pn = &prefix[((k + 1) & ring) * width];
      double* __restrict next = &dp[((k + 1) & 1) * width];
      for (std::size_t c = 0; c < width; ++c) {
        const double cost = e[c] + lambda * b[c];
        pn[c] = pk[c] + cost;
        next[c] = row[c] + cost;
      }
      std::uint32_t* __restrict from = backtrack ? &came_from[k * width] : nullptr;
      if (backtrack) std::fill(from, from + width, 0u);
      for (std::size_t j = lands_from[k + 1]; j < lands_from[k + 2] && j <= k; ++j) {
        if (!(best[j] < kInf)) continue;
        const double* __restrict pj = &prefix[(j & ring) * width];
        const double bj = best[j] + change_penalty_j;
        if (!backtrack) {
          for (std::size_t c = 0; c < width; ++c) next[c] = std::min(next[c], bj + (pn[c] - pj[c]));
          continue;
        }
        const auto mark = static_cast<std::uint32_t>(j + 1);
        for (std::size_t c = 0; c < width; ++c) {
          const double u = bj + (pn[c] - pj[c]);
          if (u < next[c]) next[c] = u, from[c] = mark;  // strictly less: the first of equal ways is kept
        }
      }
    }
    const double* last = &dp[(ops & 1) * width];
    std::size_t c = 0;
    for (std::size_t k = 1; k < width; ++k)
      if (last[k] < last[c]) c = k;
    if (start_clock < width && last[start_clock] < kInf) c = start_clock;
    Result r;
    r.end_clock = c;
    if (!backtrack) return r;
    r.clock.assign(ops, c);
    // Back from the end: at (k, c) the way the sweep reached it; a phase that landed at k from j left from the
    // cheapest clocks of row j.
    std::size_t k = ops;
    while (k > 0) {
      const std::uint32_t way = came_from[(k - 1) * width + c];
      if (way == 0) {
        r.clock[--k] = c;
      } else {
        const std::size_t j = way - 1;
        for (std::size_t i = j; i < k; ++i) r.clock[i] = c;
        c = best_at[j];
        k = j;
      }
    }
    for (std::size_t i = 0; i < ops; ++i) r.time_ns += t.budget(i, r.clock[i]), r.energy_j += t.energy(i, r.clock[i]);
    return r;
  }

  // The step repeats: solve with free start clocks, then again forced to start and end on the clocks that
  // plan ends with.
  const Result& solve(double lambda) {
    auto it = solved.find(lambda);
    if (it != solved.end()) return it->second;
    Result r = solve_once(lambda, solve_once(lambda, nc, false).end_clock, true);
    return solved.emplace(lambda, std::move(r)).first->second;
  }
};

PhasePlanner::PhasePlanner(const ClockTable& t, double switch_latency_ns, PhaseScratch* scratch)
    : impl_(std::make_unique<Impl>(t, switch_latency_ns, scratch)), latency_ns_(switch_latency_ns) {}
PhasePlanner::~PhasePlanner() = default;
PhasePlanner::PhasePlanner(PhasePlanner&&) noexcept = default;

const PhasePlanner::Result& PhasePlanner::solve(double lambda) { return impl_->solve(lambda); }

Schedule PhasePlanner::plan(double budget, double lambda_hint) {
  // T(λ) does not increase with λ. Bracket the budget between a λ whose plan is too slow and one whose plan
  // fits (from the λ already solved, e.g. for other budgets, else by growing λ), then move to the slope of
  // the segment between the two plans (E_fit − E_slow)/(T_slow − T_fit): a plan there that is no better
  // than the two in E + λ·T means they are neighbours on the lower hull of (T, E), which ends the search.
  // The least-energy plan that fits among every λ tried is returned.
  auto& solved = impl_->solved;
  auto fits = [&](const Result& r) { return r.time_ns <= budget; };
  if (solved.empty()) {
    solve(0);
    if (lambda_hint > 0) solve(lambda_hint);
  }
  double lo = -1, hi = -1;  // largest λ too slow, smallest λ that fits
  for (const auto& [l, r] : solved) {
    if (!fits(r)) lo = l;
    else if (hi < 0 && l > lo) hi = l;
  }
  if (hi >= 0 && lo >= 0 && hi < lo) hi = -1;
  if (lo >= 0) {
    if (hi < 0) {
      const double grow = lambda_hint > 0 ? 2 : 4;
      hi = std::max(lo * grow, 1e-10);
      for (int k = 0; k < 60 && !fits(solve(hi)); ++k) lo = hi, hi *= grow;
    }
    for (int k = 0; k < 40 && fits(solve(hi)) && !fits(solve(lo)); ++k) {
      const Result &a = solve(lo), &b = solve(hi);
      if (a.clock == b.clock || a.time_ns <= b.time_ns) break;
      double mid = (b.energy_j - a.energy_j) / (a.time_ns - b.time_ns);
      if (!(mid > lo && mid < hi)) mid = 0.5 * (lo + hi);
      const Result& m = solve(mid);
      const double line = a.energy_j + mid * a.time_ns;
      const double tol = 1e-12 * std::max(1.0, std::abs(line));
      if (m.energy_j + mid * m.time_ns >= line - tol) break;  // no plan below the segment: neighbours
      (fits(m) ? hi : lo) = mid;
    }
  }
  const Result* pick = nullptr;
  for (const auto& [l, r] : solved)
    if (fits(r) && (!pick || r.energy_j < pick->energy_j)) pick = &r, last_lambda_ = l;
  Schedule s{Strategy::phase, latency_ns_, {}, -1};
  const ClockTable& t = impl_->t;
  if (!pick) {  // not even the fastest plan fits: the default clocks (the caller reports it)
    s.clocks.assign(t.ops, t.clocks[t.default_index]);
    return s;
  }
  for (std::size_t c : pick->clock) s.clocks.push_back(t.clocks[c]);
  return s;
}

Schedule plan_phase(const ClockTable& t, const model::Workload&, double budget, double latency_ns) {
  return PhasePlanner(t, latency_ns).plan(budget);
}

}  // namespace gearshift::plan
