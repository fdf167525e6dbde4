#include "pipeline/measured_profile.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/core.h>

#include "pipeline/error.hpp"

namespace gearshift::pipeline {

namespace {

struct Instance {
  int clock = 0;
  double time_s = 0;
};

// [rank] -> per (instruction, microbatch) clock and measured time of one plan.
std::vector<std::map<std::pair<Instruction, int>, Instance>> instances(const MeasuredPlan& p) {
  const auto& run = p.run;
  const auto& sch = p.schedule;
  if (sch.ranks.size() != run.ranks.size())
    throw PipelineError(fmt::format("plan {}: the sched has {} ranks, the measured run ({}) {}", p.name,
                                    sch.ranks.size(), run.source, run.ranks.size()));
  std::vector<std::map<std::pair<Instruction, int>, Instance>> out(run.ranks.size());
  for (std::size_t r = 0; r < run.ranks.size(); ++r) {
    const MeasuredRank& m = run.ranks[r];
    for (const PlanStep& st : sch.ranks[r]) {
      if (!st.instruction || !st.microbatch || st.clock_mhz <= 0 ||
          (*st.instruction != Instruction::kForward && *st.instruction != Instruction::kBackward))
        throw PipelineError(fmt::format("plan {}: {}: not a forward/backward with a microbatch and a clock", p.name,
                                        st.where));
      const int mb = *st.microbatch;
      if (mb < 0 || mb >= run.microbatches)
        throw PipelineError(fmt::format("plan {}: {}: microbatch {}, but {} measures {} per iteration", p.name,
                                        st.where, mb, run.source, run.microbatches));
      const auto k = static_cast<std::size_t>(mb);
      const bool fw = *st.instruction == Instruction::kForward;
      if (!out[r].emplace(std::make_pair(*st.instruction, mb),
                          Instance{st.clock_mhz, fw ? m.forward_s[k] + m.load_s[k] : m.backward_s[k]})
               .second)
        throw PipelineError(fmt::format("plan {}: {}: a second {} of microbatch {}", p.name, st.where,
                                        instruction_name(*st.instruction), mb));
    }
    if (out[r].size() != 2 * static_cast<std::size_t>(run.microbatches))
      throw PipelineError(fmt::format("plan {}: rank {}: the sched has {} computations; {} measures {} microbatches",
                                      p.name, r, out[r].size(), run.source, run.microbatches));
  }
  return out;
}

// Solves A x = b (n×n, partial pivoting); false when singular relative to the matrix's scale.
bool solve(std::vector<std::vector<double>> A, std::vector<double> b, std::vector<double>& x) {
  const std::size_t n = b.size();
  double scale = 0;
  for (const auto& row : A)
    for (double v : row) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t p = i;
    for (std::size_t r = i + 1; r < n; ++r)
      if (std::abs(A[r][i]) > std::abs(A[p][i])) p = r;
    if (!(std::abs(A[p][i]) > 1e-10 * scale)) return false;
    std::swap(A[i], A[p]);
    std::swap(b[i], b[p]);
    for (std::size_t r = 0; r < n; ++r) {
      if (r == i) continue;
      const double f = A[r][i] / A[i][i];
      for (std::size_t c = i; c < n; ++c) A[r][c] -= f * A[i][c];
      b[r] -= f * b[i];
    }
  }
  x.resize(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = b[i] / A[i][i];
  return true;
}

}  // namespace

MeasuredProfile build_measured_profile(const std::vector<MeasuredPlan>& plans, int clock_step_mhz) {
  if (plans.empty()) throw PipelineError("no measured plans to build a profile from");
  const std::size_t S = plans.front().run.ranks.size();
  const int M = plans.front().run.microbatches;
  // (stage, instruction, clock) -> (sum of times, count)
  std::map<std::tuple<int, Instruction, int>, std::pair<double, int>> acc;
  struct Row {  // one (plan, rank) of the power fit
    std::vector<double> x;
    double y;
  };
  std::vector<Row> fit;
  const std::size_t nx = 2 * S + 2;  // a_s, b_s per stage; k shared; P_block
  for (const auto& p : plans) {
    if (p.run.ranks.size() != S || p.run.microbatches != M)
      throw PipelineError(fmt::format("plan {} ({}): {} ranks x {} microbatches; plan {} has {} x {}", p.name,
                                      p.run.source, p.run.ranks.size(), p.run.microbatches, plans.front().name, S, M));
    const auto inst = instances(p);
    for (std::size_t r = 0; r < S; ++r) {
      Row row{std::vector<double>(nx, 0.0), p.run.ranks[r].energy_j};
      double busy = 0;
      for (const auto& [key, in] : inst[r]) {
        auto& a = acc[{static_cast<int>(r), key.first, in.clock}];
        a.first += in.time_s;
        a.second += 1;
        const double x = in.clock / 1000.0;
        row.x[2 * r] += in.time_s;
        row.x[2 * r + 1] += x * in.time_s;
        row.x[2 * S] += x * x * in.time_s;
        busy += in.time_s;
      }
      row.x[nx - 1] = p.run.ranks[r].iteration_s - busy;
      fit.push_back(std::move(row));
    }
  }
  MeasuredProfile mp;
  mp.plans = static_cast<int>(plans.size());
  // Every clock measured anywhere gets a row in every group (validate_profile wants the same clocks everywhere).
  std::map<std::pair<int, Instruction>, std::map<int, double>> groups;
  std::set<int> all;
  for (const auto& [k, a] : acc) {
    groups[{std::get<0>(k), std::get<1>(k)}][std::get<2>(k)] = a.first / a.second;
    all.insert(std::get<2>(k));
  }
  if (clock_step_mhz < 0) throw PipelineError("the clock step must be ≥ 0 MHz");
  if (clock_step_mhz > 0 && !all.empty())
    for (int c = *all.rbegin(); c > *all.begin(); c -= clock_step_mhz) all.insert(c);
  for (const auto& [g, by] : groups)
    if (by.size() < 2 && all.size() > 1)
      throw PipelineError(fmt::format("stage {} {} was measured at one clock ({} MHz) only; its time at the other "
                                      "measured clocks cannot be interpolated",
                                      g.first, instruction_name(g.second), by.begin()->first));
  // Power fit: normal equations.
  if (fit.size() < nx)
    throw PipelineError(fmt::format("the power fit has {} unknowns but only {} (plan, rank) energies; give more plans",
                                    nx, fit.size()));
  std::vector<std::vector<double>> A(nx, std::vector<double>(nx, 0.0));
  std::vector<double> b(nx, 0.0), w;
  for (const auto& row : fit)
    for (std::size_t i = 0; i < nx; ++i) {
      b[i] += row.x[i] * row.y;
      for (std::size_t j = 0; j < nx; ++j) A[i][j] += row.x[i] * row.x[j];
    }
  if (!solve(A, b, w))
    throw PipelineError("the measured plans do not determine the power fit (fewer than two clocks on some stage, or "
                        "three over all, in the plans? add plans at other clocks)");
  mp.blocking_power_w = w[nx - 1];
  for (std::size_t s = 0; s < S; ++s) mp.power.push_back({w[2 * s], w[2 * s + 1], w[2 * S]});
  if (mp.blocking_power_w < 0)
    throw PipelineError(fmt::format("the power fit gives a blocking power of {:.1f} W (< 0): the plans' energies do "
                                    "not separate waiting from computing", mp.blocking_power_w));
  double ss = 0;
  for (const auto& row : fit) {
    double e = 0;
    for (std::size_t i = 0; i < nx; ++i) e += w[i] * row.x[i];
    ss += (e - row.y) * (e - row.y);
    if (row.y > 0) mp.max_residual_pct = std::max(mp.max_residual_pct, 100 * std::abs(e - row.y) / row.y);
  }
  mp.rms_residual_j = std::sqrt(ss / static_cast<double>(fit.size()));
  mp.profile.source = "measured";
  int line = 0;
  for (const auto& [g, by] : groups) {
    const auto& pw = mp.power[static_cast<std::size_t>(g.first)];
    for (int c : all) {
      double t;
      auto hit = by.find(c);
      if (hit != by.end()) {
        t = hit->second;
      } else {
        // The two measured clocks around c, or the two nearest on its side when c is outside the measured range.
        auto hi = by.upper_bound(c);
        if (hi == by.begin()) ++hi;
        if (hi == by.end()) --hi;
        auto lo = std::prev(hi);
        t = lo->second + (hi->second - lo->second) * (c - lo->first) / static_cast<double>(hi->first - lo->first);
        const bool inside = c > by.begin()->first && c < by.rbegin()->first;
        ++(inside ? mp.interpolated_rows : mp.extrapolated_rows);
        if (!(t > 0))
          throw PipelineError(fmt::format("stage {} {} at {} MHz: extrapolated time {} s is not positive", g.first,
                                          instruction_name(g.second), c, t));
      }
      if (pw.at(c) <= 0)
        throw PipelineError(fmt::format("the power fit gives stage {} a busy power of {:.1f} W at {} MHz (≤ 0)",
                                        g.first, pw.at(c), c));
      mp.profile.rows.push_back({g.first, g.second, c, t, pw.at(c) * t, ++line});
    }
  }
  return mp;
}

std::string measured_profile_csv(const MeasuredProfile& mp, const std::string& origin) {
  std::string o = "# gearshift pipeline profile v1\n";
  o += fmt::format("# built from {} measured plans: {} (times MEASURED, mean per clock; energies MODELLED from a "
                   "least-squares power fit of the per-rank iteration energies)\n",
                   mp.plans, origin);
  o += fmt::format("# blocking_power_w={:.3f} (fitted; pass it as --blocking-power-w)\n", mp.blocking_power_w);
  for (std::size_t s = 0; s < mp.power.size(); ++s)
    o += fmt::format("# stage {} busy power [W] = {:.3f} + {:.3f} * x + {:.3f} * x^2, x = MHz/1000\n", s,
                     mp.power[s].a_w, mp.power[s].b_w_per_ghz, mp.power[s].k_w_per_ghz2);
  o += "stage,instruction,sm_clock_mhz,time_s,energy_j\n";
  for (const auto& r : mp.profile.rows)
    o += fmt::format("{},{},{},{:.9g},{:.9g}\n", r.stage, instruction_name(r.instruction), r.sm_clock_mhz, r.time_s,
                     r.energy_j);
  return o;
}

}  // namespace gearshift::pipeline
