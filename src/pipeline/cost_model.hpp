// Per-instruction cost models on an integer time grid: f(d) = modelled non-blocking energy [J] of one
// instruction that takes d time units (unit u [s]).
//
// Preparation follows the Perseus data README §3.1 (Chung et al., SOSP'24):
//  1. Pareto filter on raw (time, energy): drop an option when another is strictly faster AND strictly
//     cheaper (if ≤ 3 survive, the relaxed test "faster than 0.95·t and cheaper than 0.95·e" is used).
//  2. Quantize q = floor(time / u).  3. Same q: keep the option with the largest raw energy.
//  4. Effective energy e_eff = energy − P·q·u (P = blocking power per GPU [W]); the blocking energy of the whole
//     iteration, S·T·u·P, is added back by the frontier.
// Cost models over the integer domain d ∈ [q_min, q_max]:
//  * kHull (default): lower convex hull of the (q, e_eff) points, piecewise linear. A duration strictly between
//    two hull vertices is realised by running the instruction partly at each of the two clocks (exact), or by
//    rounding to the slowest kept option with q ≤ d (meets the time; costs more, reported as rounding error).
//  * kExpFit: f(d) = a·exp(b·d) + c fitted to the (q, e_eff) points (exp_fit.hpp); the clock for d is the
//    slowest kept option with q ≤ d. This reproduces the Perseus reference frontiers.
// Both are convex and non-increasing in d, which the frontier solver needs.
#pragma once

#include <string>
#include <vector>

#include "pipeline/exp_fit.hpp"
#include "pipeline/profile.hpp"

namespace gearshift::pipeline {

enum class CostModelKind { kHull, kExpFit };

struct ModelParams {
  double unit_s = 1e-3;            // time unit u [s]
  double blocking_power_w = 0.0;   // per-GPU power while waiting [W]
  CostModelKind kind = CostModelKind::kHull;
};

struct KeptOption {
  int sm_clock_mhz = 0;
  int q = 0;              // quantized time [units]
  double time_s = 0;      // measured [s]
  double energy_j = 0;    // measured [J]
  double e_eff_j = 0;     // energy − P·q·u [J]
};

// How a duration d is run on real clocks.
struct Realisation {
  int slow_clock_mhz = 0;     // clock of the slower hull vertex (or the only clock)
  int fast_clock_mhz = 0;     // clock of the faster vertex; equals slow_clock_mhz when no split is needed
  double fast_fraction = 0;   // share of the instruction's work run at fast_clock_mhz (0..1)
  int rounded_clock_mhz = 0;  // single-clock alternative: slowest kept option with q ≤ d
  int rounded_q = 0;          // its quantized time [units] (≤ d)
  double rounded_extra_j = 0; // e_eff(rounded) − f(d) [J], ≥ 0 for the hull model
};

// One profiled clock on the planner's grid: q = floor(time/u) [units] (< 1 or > 1e8 units: PipelineError naming
// `what`), e_eff = energy − P·q·u [J]. The cost model and the schedule evaluator (evaluate.hpp) both use it.
KeptOption grid_option(const ProfileRow& row, const ModelParams& params, const std::string& what);

class OperationModel {
 public:
  // rows: every profile row of one (stage, instruction). Throws PipelineError (e.g. time below one unit).
  OperationModel(const std::vector<ProfileRow>& rows, const ModelParams& params, const std::string& what);

  int q_min() const { return q_min_; }
  int q_max() const { return q_max_; }
  double cost(int d) const { return cost_[d - q_min_]; }  // f(d) [J], q_min ≤ d ≤ q_max
  Realisation realise(int d) const;

  const std::vector<KeptOption>& kept() const { return kept_; }  // sorted by q ascending
  int dropped_dominated() const { return dropped_dominated_; }
  int dropped_same_q() const { return dropped_same_q_; }
  const ExpFit& fit() const { return fit_; }                // meaningful for kExpFit only
  const std::vector<int>& hull() const { return hull_; }    // indices into kept(), q ascending

 private:
  std::vector<KeptOption> kept_;
  std::vector<int> hull_;
  std::vector<double> cost_;
  ExpFit fit_;
  CostModelKind kind_;
  int q_min_ = 0, q_max_ = 0;
  int dropped_dominated_ = 0, dropped_same_q_ = 0;
};

// Models of every (stage, instruction) present in a validated profile.
struct StageModels {
  ModelParams params;
  int stages = 0;
  bool recompute = false;
  std::vector<std::vector<OperationModel>> by_stage;  // [stage][instruction]; recompute only when present
  const OperationModel& at(int stage, Instruction i) const { return by_stage[stage][static_cast<int>(i)]; }
  int dropped_dominated() const;
  int dropped_same_q() const;
};

StageModels build_models(const Profile& profile, int stages, const ModelParams& params);

}  // namespace gearshift::pipeline
