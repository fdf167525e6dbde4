// Comparison of a frontier with a reference curve (Perseus data README §4).
//  Level A: same model and grid: match rows on T = round(time/u), r = |E_ours − E_ref| / E_ref, plus end points
//           and row count.
//  Level B: any model: both curves become staircases Ê(t) = min{e : (t', e), t' ≤ t + 1e-9}; at every
//           reference time t ≥ our fastest time, r(t) = (Ê_ours(t) − Ê_ref(t)) / Ê_ref(t) (negative = ours better).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pipeline/frontier.hpp"

namespace gearshift::pipeline {

using Curve = std::vector<std::pair<double, double>>;  // (time [s], energy [J]) rows in file order

// Reads a `time,energy` CSV. Throws PipelineError naming the row on bad content.
Curve read_curve_csv(const std::string& path);
// Our rows in the reference layout: points[1..] (the all-slowest start is not a row).
Curve frontier_rows(const Frontier& f);

struct LevelA {
  bool first_matches = false, last_matches = false;
  std::size_t rows_ours = 0, rows_ref = 0;
  std::size_t unmatched = 0;  // reference rows without a row of ours at the same T
  double max_r = 0;
};
LevelA compare_level_a(const Curve& ours, const Curve& ref, double unit_s);

struct LevelB {
  std::size_t compared = 0, uncovered = 0;
  double min_r = 0, mean_r = 0, max_r = 0, max_abs_r = 0;
};
LevelB compare_level_b(const Curve& ours, const Curve& ref);

}  // namespace gearshift::pipeline
