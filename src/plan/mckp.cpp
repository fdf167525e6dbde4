#include "plan/mckp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace gearshift::plan {
namespace {

// Lower convex hull from the minimum-energy option towards the fastest: times strictly decreasing, energies
// strictly increasing, slopes ΔE/(−ΔT) increasing.
std::vector<std::size_t> hull(const MckpInstance& in, std::size_t g) {
  const double* t = in.time + g * in.options;
  const double* e = in.energy + g * in.options;
  std::vector<std::size_t> idx(in.options);
  std::iota(idx.begin(), idx.end(), 0);
  // Sort by time descending, energy ascending as tie-break.
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return t[a] != t[b] ? t[a] > t[b] : e[a] < e[b]; });
  // Keep options with energy lower than every slower option... walking from slow to fast we need increasing
  // energy: first find the minimum-energy option; slower ones are dominated.
  std::size_t start = 0;
  for (std::size_t k = 1; k < idx.size(); ++k)
    if (e[idx[k]] < e[idx[start]]) start = k;
  std::vector<std::size_t> pareto;
  double best_t = std::numeric_limits<double>::infinity();
  for (std::size_t k = start; k < idx.size(); ++k) {
    std::size_t o = idx[k];
    if (t[o] < best_t) {
      // faster and not more expensive: the slower ones are dominated
      while (!pareto.empty() && e[o] <= e[pareto.back()]) pareto.pop_back();
      pareto.push_back(o);
      best_t = t[o];
    }
  }
  std::vector<std::size_t> h;
  for (std::size_t o : pareto) {
    while (h.size() >= 2) {
      std::size_t a = h[h.size() - 2], b = h.back();
      // slope a->b must be < slope b->o (convex); cross-multiplied, times decreasing
      double s1 = (e[b] - e[a]) / (t[a] - t[b]);
      double s2 = (e[o] - e[b]) / (t[b] - t[o]);
      if (s1 >= s2) h.pop_back();
      else break;
    }
    h.push_back(o);
  }
  return h;
}

// Branch and bound from the greedy's incumbent `r`, with the LP's time price λ = `price` (Lagrangian duality):
// for any choice within the budget, E = Σ (e + λ·t) − λ·T ≥ Σ_g min_o (e + λ·t) + Σ_g rc_g − λ·B, where rc_g is
// the choice's reduced cost e + λ·t − min in group g. So LB = Σ_g min − λ·B is a lower bound, an option whose
// reduced cost exceeds E_incumbent − LB cannot be in a better choice (fixed out), and a partial choice is cut
// when LB + its reduced costs + λ·(slack it must leave at best) reaches the incumbent. The groups left with
// several options are searched depth first. Proven optimal when the search ends within its node limit
// (lower_bound = energy); otherwise the bound stays LB.
void exact_search(const MckpInstance& in, double budget, double price, MckpResult& r) {
  constexpr long kNodeLimit = 300'000;  // ≈ 3 ms; small instances end far below
  const std::size_t no = in.options;
  double lb = -price * budget;
  std::vector<double> best(in.groups);
  for (std::size_t g = 0; g < in.groups; ++g) {
    double m = std::numeric_limits<double>::infinity();
    for (std::size_t o = 0; o < no; ++o) m = std::min(m, in.energy[g * no + o] + price * in.time[g * no + o]);
    best[g] = m;
    lb += m;
  }
  r.lower_bound = std::max(std::min(r.lower_bound, r.energy), std::min(lb, r.energy));
  const double tol = 1e-12 * std::max(1.0, std::abs(r.energy));
  if (r.energy - lb <= tol) return;
  struct Free {
    std::size_t group;
    std::vector<std::size_t> options;  // reduced cost within the gap, ascending
  };
  // Reduced-cost fixing against the incumbent's gap.
  const double window = r.energy - lb + tol;
  std::vector<Free> free;
  double fixed_t = 0, fixed_e = 0, fixed_rc = 0;
  std::vector<std::size_t> choice = r.choice;
  for (std::size_t g = 0; g < in.groups; ++g) {
    std::vector<std::size_t> keep;
    for (std::size_t o = 0; o < no; ++o)
      if (in.energy[g * no + o] + price * in.time[g * no + o] - best[g] <= window) keep.push_back(o);
    auto rc = [&](std::size_t o) { return in.energy[g * no + o] + price * in.time[g * no + o] - best[g]; };
    std::sort(keep.begin(), keep.end(), [&](auto a, auto b) { return rc(a) < rc(b); });
    if (keep.size() == 1) {
      choice[g] = keep[0];
      fixed_t += in.time[g * no + keep[0]], fixed_e += in.energy[g * no + keep[0]], fixed_rc += rc(keep[0]);
    } else {
      free.push_back({g, std::move(keep)});
    }
  }
  // Suffix sums over the free groups: least and greatest time still to come.
  const std::size_t nf = free.size();
  std::vector<double> min_t(nf + 1, 0), max_t(nf + 1, 0);
  for (std::size_t k = nf; k-- > 0;) {
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (std::size_t o : free[k].options) lo = std::min(lo, in.time[free[k].group * no + o]), hi = std::max(hi, in.time[free[k].group * no + o]);
    min_t[k] = min_t[k + 1] + lo, max_t[k] = max_t[k + 1] + hi;
  }
  long nodes = 0;
  bool complete = true;
  std::vector<std::size_t> pick(nf, 0);
  // Depth-first, iterative: level k chooses pick[k] among free[k].options.
  std::vector<double> t_at(nf + 1), e_at(nf + 1), rc_at(nf + 1);
  t_at[0] = fixed_t, e_at[0] = fixed_e, rc_at[0] = fixed_rc;
  std::size_t k = 0;
  std::vector<std::size_t> next(nf + 1, 0);
  while (true) {
    if (k == nf) {
      if (t_at[k] <= budget && e_at[k] < r.energy - tol) {
        r.energy = e_at[k], r.time = t_at[k];
        for (std::size_t i = 0; i < nf; ++i) choice[free[i].group] = free[i].options[pick[i]];
        r.choice = choice;
      }
      if (k == 0) break;
      --k;
      continue;
    }
    if (next[k] >= free[k].options.size()) {
      next[k] = 0;
      if (k == 0) break;
      --k;
      continue;
    }
    if (++nodes > kNodeLimit) {
      complete = false;
      break;
    }
    const std::size_t g = free[k].group, o = free[k].options[next[k]];
    pick[k] = next[k]++;
    const double t = t_at[k] + in.time[g * no + o], e = e_at[k] + in.energy[g * no + o];
    const double rc = rc_at[k] + in.energy[g * no + o] + price * in.time[g * no + o] - best[g];
    if (lb + rc >= r.energy - tol) {
      // Options are in ascending reduced cost: the rest of this group cannot do better either.
      next[k] = free[k].options.size();
      continue;
    }
    if (t + min_t[k + 1] > budget) continue;                                   // cannot fit
    if (lb + rc + price * std::max(0.0, budget - t - max_t[k + 1]) >= r.energy - tol) continue;  // slack left
    t_at[k + 1] = t, e_at[k + 1] = e, rc_at[k + 1] = rc;
    ++k;
  }
  r.lower_bound = complete ? r.energy : std::min(r.energy, std::max(lb, r.lower_bound));
}

}  // namespace

MckpSolver::MckpSolver(const MckpInstance& in) : in_(in), hulls_(in.groups) {
  min_energy_choice_.assign(in.groups, 0);
  for (std::size_t g = 0; g < in.groups; ++g) {
    hulls_[g] = hull(in, g);
    const auto& h = hulls_[g];
    const double* t = in.time + g * in.options;
    const double* e = in.energy + g * in.options;
    min_energy_choice_[g] = h.front();
    min_energy_time_ += t[h.front()];
    min_energy_ += e[h.front()];
    for (std::size_t k = 1; k < h.size(); ++k)
      segs_.push_back({(e[h[k]] - e[h[k - 1]]) / (t[h[k - 1]] - t[h[k]]), g, k});
  }
}

MckpResult solve_mckp(const MckpInstance& in, double budget) { return MckpSolver(in).solve(budget); }

MckpResult MckpSolver::solve(double budget) {
  const MckpInstance& in = in_;
  MckpResult r;
  r.choice = min_energy_choice_;
  r.time = min_energy_time_;
  r.energy = min_energy_;
  r.lower_bound = r.energy;
  if (r.time <= budget) return r;  // the unconstrained minimum fits: optimal, gap 0
  double price = 0;  // slope of the segment that meets the budget: the LP's time price λ*, J per unit time
  if (!segs_sorted_) {
    std::sort(segs_.begin(), segs_.end(), [](const Segment& a, const Segment& b) {
      return a.slope != b.slope ? a.slope < b.slope : a.group < b.group;
    });
    segs_sorted_ = true;
  }
  for (const Segment& s : segs_) {
    const double* t = in.time + s.group * in.options;
    const double* e = in.energy + s.group * in.options;
    std::size_t from = hulls_[s.group][s.to_rank - 1], to = hulls_[s.group][s.to_rank];
    double dt = t[from] - t[to], de = e[to] - e[from];
    price = s.slope;  // the last segment taken prices time (also when rounding leaves the loop at the end)
    if (r.time - dt <= budget) {
      // LP bound: only the fraction of this segment that is needed.
      double need = r.time - budget;
      r.lower_bound = r.energy + de * (need / dt);
      r.time -= dt;
      r.energy += de;
      r.choice[s.group] = to;
      break;
    }
    r.time -= dt;
    r.energy += de;
    r.choice[s.group] = to;
  }
  if (r.time > budget + 1e-9 * std::max(1.0, budget)) {
    // Every group at its fastest and still over: infeasible.
    r.feasible = false;
    r.lower_bound = r.energy;
    r.gap = 0;
    return r;
  }
  // Repair: spend the slack on the best energy reductions (any option, hull or not), one move at a time.
  for (int round = 0; round < 64; ++round) {
    double slack = budget - r.time;
    double best_gain = 0;
    std::size_t best_g = 0, best_o = 0;
    for (std::size_t g = 0; g < in.groups; ++g) {
      const double* t = in.time + g * in.options;
      const double* e = in.energy + g * in.options;
      std::size_t cur = r.choice[g];
      for (std::size_t o = 0; o < in.options; ++o) {
        double gain = e[cur] - e[o];
        if (gain > best_gain && t[o] - t[cur] <= slack) best_gain = gain, best_g = g, best_o = o;
      }
    }
    if (best_gain <= 0) break;
    const double* t = in.time + best_g * in.options;
    const double* e = in.energy + best_g * in.options;
    r.time += t[best_o] - t[r.choice[best_g]];
    r.energy += e[best_o] - e[r.choice[best_g]];
    r.choice[best_g] = best_o;
  }
  r.lower_bound = std::min(r.lower_bound, r.energy);
  exact_search(in, budget, price, r);
  r.lower_bound = std::min(r.lower_bound, r.energy);
  r.gap = r.lower_bound > 0 ? std::max(0.0, (r.energy - r.lower_bound) / r.lower_bound) : 0;
  return r;
}

MckpResult solve_mckp_brute_force(const MckpInstance& in, double budget) {
  MckpResult best;
  best.energy = std::numeric_limits<double>::infinity();
  best.feasible = false;
  std::vector<std::size_t> cur(in.groups, 0);
  for (;;) {
    double t = 0, e = 0;
    for (std::size_t g = 0; g < in.groups; ++g) t += in.time[g * in.options + cur[g]], e += in.energy[g * in.options + cur[g]];
    if (t <= budget && e < best.energy) best.energy = e, best.time = t, best.choice = cur, best.feasible = true;
    std::size_t g = 0;
    while (g < in.groups && ++cur[g] == in.options) cur[g++] = 0;
    if (g == in.groups) break;
  }
  best.lower_bound = best.energy;
  return best;
}

}  // namespace gearshift::plan
