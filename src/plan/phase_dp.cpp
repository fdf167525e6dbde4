#include <algorithm>
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
  std::vector<double> prefix, dp;
  std::vector<double> best;  // per position a phase may land at: the least dp value to leave from
  std::map<double, Result> solved;  // λ -> the cyclic plan for it
  double change_penalty_j = 1e-9;   // kChangePenaltyShare of the step at the default clocks, J

  Impl(const ClockTable& table, double latency_ns)
      : t(table), n(table.ops), nc(table.clocks.size()), window_end(n + 1, n + 1), lands_from(n + 2, 0),
        prefix((n + 1) * nc), dp((n + 1) * nc), best(n + 1) {
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
  }

  // The plan minimising Σ (E + λ·T); start_clock < nc forces the clocks in effect at the step start and makes
  // the plan end on them (no change at the wrap).
  Result solve_once(double lambda, std::size_t start_clock) {
    const double* budget = t.budget_data();
    for (std::size_t c = 0; c < nc; ++c) prefix[c] = 0;
    for (std::size_t c = 0; c < nc; ++c) dp[c] = start_clock >= nc || c == start_clock ? 0 : kInf;
    // One sweep (memory-bound: each row's table entries, prefix and dp are touched once).
    for (std::size_t k = 0; k < n; ++k) {
      // Row k is final: where a phase may land at k, the cheapest clocks to leave from. (Landing on those very
      // clocks is never cheaper than continuing on them, so that min serves every target clock.)
      const double* __restrict row = &dp[k * nc];
      if (window_end[k] <= n) best[k] = t.may_change.empty() || t.may_change[k] ? min_of(row, 0, nc) : kInf;
      // Row k+1: continue at the same clocks, or the end of the hold of a phase that landed earlier.
      const double* __restrict e = &t.energy_j[k * nc];
      const double* __restrict b = budget + k * nc;
      const double* __restrict pk = &prefix[k * nc];
      double* __restrict pn = &prefix[(k + 1) * nc];
      double* __restrict next = &dp[(k + 1) * nc];
      for (std::size_t c = 0; c < nc; ++c) {
        const double cost = e[c] + lambda * b[c];
        pn[c] = pk[c] + cost;
        next[c] = row[c] + cost;
      }
      for (std::size_t j = lands_from[k + 1]; j < lands_from[k + 2] && j <= k; ++j) {
        if (!(best[j] < kInf)) continue;
        const double* __restrict pj = &prefix[j * nc];
        const double bj = best[j] + change_penalty_j;
        for (std::size_t c = 0; c < nc; ++c) next[c] = std::min(next[c], bj + (pn[c] - pj[c]));
      }
    }
    const double* last = &dp[n * nc];
    std::size_t c = 0;
    for (std::size_t k = 1; k < nc; ++k)
      if (last[k] < last[c]) c = k;
    if (start_clock < nc && last[start_clock] < kInf) c = start_clock;
    Result r;
    r.end_clock = c;
    r.clock.assign(n, c);
    // Back from the end: at (k, c) the cheapest of the ways into it (continuing first on a tie); a phase that
    // landed at j left from the cheapest clocks of row j.
    std::size_t k = n;
    while (k > 0) {
      const std::size_t cell = (k - 1) * nc + c;
      double v = dp[cell] + (t.energy_j[cell] + lambda * budget[cell]);
      std::size_t from = k;  // k: continued
      for (std::size_t j = lands_from[k]; j < lands_from[k + 1] && j < k; ++j) {
        if (!(best[j] < kInf)) continue;
        const double u = best[j] + change_penalty_j + (prefix[k * nc + c] - prefix[j * nc + c]);
        if (u < v) v = u, from = j;
      }
      if (from == k) {
        r.clock[--k] = c;
      } else {
        for (std::size_t i = from; i < k; ++i) r.clock[i] = c;
        const double* row = &dp[from * nc];
        std::size_t a = 0;
        while (a + 1 < nc && row[a] != best[from]) ++a;
        c = a;
        k = from;
      }
    }
    for (std::size_t i = 0; i < n; ++i) r.time_ns += t.budget(i, r.clock[i]), r.energy_j += t.energy(i, r.clock[i]);
    return r;
  }

  // The step repeats: solve with free start clocks, then again forced to start and end on the clocks that
  // plan ends with.
  const Result& solve(double lambda) {
    auto it = solved.find(lambda);
    if (it != solved.end()) return it->second;
    Result r = solve_once(lambda, solve_once(lambda, nc).end_clock);
    return solved.emplace(lambda, std::move(r)).first->second;
  }
};

PhasePlanner::PhasePlanner(const ClockTable& t, double switch_latency_ns)
    : impl_(std::make_unique<Impl>(t, switch_latency_ns)), latency_ns_(switch_latency_ns) {}
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
