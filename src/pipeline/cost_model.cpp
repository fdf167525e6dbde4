#include "pipeline/cost_model.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/core.h>

#include "pipeline/error.hpp"

namespace gearshift::pipeline {

namespace {

// Indices of rows that survive the Pareto test with slack factor k (1 = strict).
std::vector<std::size_t> pareto(const std::vector<ProfileRow>& rows, double k) {
  std::vector<std::size_t> keep;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    bool dominated = false;
    for (std::size_t j = 0; j < rows.size() && !dominated; ++j)
      dominated = j != i && rows[j].time_s < k * rows[i].time_s && rows[j].energy_j < k * rows[i].energy_j;
    if (!dominated) keep.push_back(i);
  }
  return keep;
}

// Lower convex hull (Andrew's monotone chain) of points sorted by strictly increasing x.
std::vector<int> lower_hull(const std::vector<KeptOption>& pts) {
  std::vector<int> h;
  for (int i = 0; i < static_cast<int>(pts.size()); ++i) {
    while (h.size() >= 2) {
      const auto& a = pts[h[h.size() - 2]];
      const auto& b = pts[h.back()];
      const auto& c = pts[i];
      double cross = static_cast<double>(b.q - a.q) * (c.e_eff_j - a.e_eff_j) -
                     (b.e_eff_j - a.e_eff_j) * static_cast<double>(c.q - a.q);
      if (cross <= 0) h.pop_back();  // b lies on or above segment a–c
      else break;
    }
    h.push_back(i);
  }
  return h;
}

}  // namespace

KeptOption grid_option(const ProfileRow& r, const ModelParams& params, const std::string& what) {
  double q = std::floor(r.time_s / params.unit_s);
  if (q < 1)
    throw PipelineError(fmt::format("{}: {} MHz takes {} s, less than one time unit ({} s); use a smaller "
                                    "--time-unit-ms",
                                    what, r.sm_clock_mhz, r.time_s, params.unit_s));
  if (q > 1e8) throw PipelineError(fmt::format("{}: {} s is over 1e8 time units; use a larger --time-unit-ms", what, r.time_s));
  const int qi = static_cast<int>(q);
  return {r.sm_clock_mhz, qi, r.time_s, r.energy_j, r.energy_j - params.blocking_power_w * qi * params.unit_s};
}

OperationModel::OperationModel(const std::vector<ProfileRow>& rows, const ModelParams& params,
                               const std::string& what)
    : kind_(params.kind) {
  if (!(params.unit_s > 0)) throw PipelineError("time unit must be > 0");
  if (rows.empty()) throw PipelineError(what + ": no profile rows");
  auto keep = pareto(rows, 1.0);
  if (keep.size() <= 3) keep = pareto(rows, 0.95);
  dropped_dominated_ = static_cast<int>(rows.size() - keep.size());
  std::vector<KeptOption> opts;
  for (auto i : keep) opts.push_back(grid_option(rows[i], params, what));
  // Same q: the largest raw energy wins (README §3.1 step 3).
  std::sort(opts.begin(), opts.end(), [](const KeptOption& a, const KeptOption& b) {
    return a.q != b.q ? a.q < b.q : a.energy_j > b.energy_j;
  });
  for (const auto& o : opts)
    if (kept_.empty() || kept_.back().q != o.q) kept_.push_back(o);
  dropped_same_q_ = static_cast<int>(opts.size() - kept_.size());
  q_min_ = kept_.front().q;
  q_max_ = kept_.back().q;
  hull_ = lower_hull(kept_);
  cost_.resize(static_cast<std::size_t>(q_max_ - q_min_ + 1));
  if (kind_ == CostModelKind::kExpFit && kept_.size() >= 2) {
    std::vector<double> x, y;
    for (const auto& o : kept_) {
      x.push_back(o.q);
      y.push_back(o.e_eff_j);
    }
    fit_ = fit_exponential(x, y);
    for (int d = q_min_; d <= q_max_; ++d) cost_[d - q_min_] = fit_(d);
  } else {
    // Piecewise-linear interpolation between consecutive hull vertices.
    for (std::size_t h = 0; h + 1 < hull_.size(); ++h) {
      const auto& a = kept_[hull_[h]];
      const auto& b = kept_[hull_[h + 1]];
      for (int d = a.q; d <= b.q; ++d)
        cost_[d - q_min_] = a.e_eff_j + (b.e_eff_j - a.e_eff_j) * (d - a.q) / static_cast<double>(b.q - a.q);
    }
    if (hull_.size() == 1) cost_[0] = kept_[hull_[0]].e_eff_j;
  }
}

Realisation OperationModel::realise(int d) const {
  Realisation r;
  // Slowest kept option with q ≤ d.
  auto it = std::upper_bound(kept_.begin(), kept_.end(), d, [](int v, const KeptOption& o) { return v < o.q; });
  const KeptOption& rounded = *std::prev(it);
  r.rounded_clock_mhz = rounded.sm_clock_mhz;
  r.rounded_q = rounded.q;
  r.rounded_extra_j = rounded.e_eff_j - cost(d);
  r.slow_clock_mhz = r.fast_clock_mhz = rounded.sm_clock_mhz;
  if (kind_ == CostModelKind::kHull) {
    for (std::size_t h = 0; h + 1 < hull_.size(); ++h) {
      const auto& a = kept_[hull_[h]];
      const auto& b = kept_[hull_[h + 1]];
      if (d >= a.q && d <= b.q) {
        if (d == b.q) {
          r.slow_clock_mhz = r.fast_clock_mhz = b.sm_clock_mhz;
        } else if (d == a.q) {
          r.slow_clock_mhz = r.fast_clock_mhz = a.sm_clock_mhz;
        } else {
          r.fast_clock_mhz = a.sm_clock_mhz;
          r.slow_clock_mhz = b.sm_clock_mhz;
          r.fast_fraction = (b.q - d) / static_cast<double>(b.q - a.q);
        }
        break;
      }
    }
  }
  return r;
}

int StageModels::dropped_dominated() const {
  int n = 0;
  for (const auto& s : by_stage)
    for (const auto& m : s) n += m.dropped_dominated();
  return n;
}

int StageModels::dropped_same_q() const {
  int n = 0;
  for (const auto& s : by_stage)
    for (const auto& m : s) n += m.dropped_same_q();
  return n;
}

StageModels build_models(const Profile& profile, int stages, const ModelParams& params) {
  validate_profile(profile, stages);
  StageModels sm;
  sm.params = params;
  sm.stages = stages;
  sm.recompute = std::any_of(profile.rows.begin(), profile.rows.end(),
                             [](const ProfileRow& r) { return r.instruction == Instruction::kRecompute; });
  const int ninstr = sm.recompute ? 3 : 2;
  for (int s = 0; s < stages; ++s) {
    std::vector<OperationModel> row;
    for (int i = 0; i < ninstr; ++i) {
      std::vector<ProfileRow> group;
      for (const auto& r : profile.rows)
        if (r.stage == s && static_cast<int>(r.instruction) == i) group.push_back(r);
      row.emplace_back(group, params,
                       fmt::format("{}: stage {} {}", profile.source, s, instruction_name(static_cast<Instruction>(i))));
    }
    sm.by_stage.push_back(std::move(row));
  }
  return sm;
}

}  // namespace gearshift::pipeline
