// The measured A/B estimate of a plan against the baseline clocks on the job itself: slowdown of the step time and
// saving of the energy per step, each with a confidence interval, from blocks of whole steps run in ABBA order.
//
// Unit of the estimate: one quad, two plan blocks and two baseline blocks in ABBA (or BAAB) order. Pooled within
// the quad, each arm's mean step time is its blocks' seconds over their steps; the quad's log-ratio
// x = ln(T_plan / T_base) cancels any drift linear in time across the quad (a job that warms up or slows as its
// data changes), which adjacent A/B pairs would read as a difference of the arms. Quads are taken as independent
// samples of x: the slowdown is exp(mean x) - 1 with a Student-t interval on mean x (Q - 1 degrees of freedom),
// the standard paired-comparison interval; a t interval rather than a bootstrap because Q is small (3-10 quads),
// where bootstrap percentile intervals are known to undercover (Efron & Tibshirani 1993, ch. 13). Energy per step is
// each arm's mean power over its blocks (the energy counter between ticks) times its mean step time, with the same
// interval on ln(E_plan / E_base); the saving is 1 - exp(mean y). Log-ratios make the interval of a ratio
// symmetric in log space and keep its bounds positive.
// With 3-5 quads the quads' own standard deviation can come out far below the truth by chance, and a loop that looks
// after every quad takes such a look as proof (simulated at 5 % step noise: a 3-quad interval of +-0.1 % on a
// saving whose truth was -0.14 %). So the standard deviation used is at least what the steps' scatter within the
// blocks implies for a quad's log-ratio (sqrt(cv_plan^2/n_plan + cv_base^2/n_base), cv from the blocks' halves,
// ArmTotals::half_var_sum): between-quad variation can only add to the sampling noise of the steps themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace gearshift::verify {

// One arm's measured totals within a quad (its two blocks together).
struct ArmTotals {
  std::uint64_t steps = 0;  // whole steps measured
  double seconds = 0;       // wall time of those steps, s
  // Energy of the counter windows inside the blocks and their length, J and s; 0 s: no counter window (a block
  // too short for two counter ticks, or no energy counter): the quad then gives no energy figure.
  double joules = 0, energy_seconds = 0;
  // The steps' long-run relative variance as the blocks' halves see it, summed over blocks, and those blocks: per
  // block, (m1 - m2)^2 / (1/n1 + 1/n2) / mean^2 from the mean steps m1, m2 of its first and second halves (the
  // batch-means estimate with two batches). Not the steps' own scatter: a step measured between two boundaries
  // whose times jitter is long where the next is short, and that scatter overstated a quad's noise tenfold on the
  // stand-in job (its block sums hold only the two end boundaries' jitter).
  double half_var_sum = 0;
  std::size_t half_blocks = 0;
  double step_s() const { return steps ? seconds / static_cast<double>(steps) : 0; }
  double watts() const { return energy_seconds > 0 ? joules / energy_seconds : 0; }
};

struct Quad {
  ArmTotals plan, base;
  bool has_energy() const { return plan.energy_seconds > 0 && base.energy_seconds > 0; }
};

// A ratio's figure and its two-sided interval, as fractions (0.012 = 1.2 %).
struct Interval {
  double estimate = 0, lo = 0, hi = 0;
  double half_width() const { return (hi - lo) / 2; }
};

struct AbEstimate {
  std::size_t quads = 0;           // quads the slowdown rests on
  std::size_t energy_quads = 0;    // of those, with an energy figure for both arms
  std::uint64_t steps = 0;         // whole steps measured in those quads (both arms)
  double confidence = 0.95;        // of both intervals (two-sided)
  Interval slowdown;               // step time, plan over baseline, minus 1
  std::optional<Interval> saving;  // energy per step: 1 - plan over baseline; none under 2 energy quads
  double sd_log_time = 0;          // standard deviation of the quads' log step-time ratios (0 under 2 quads)
  double sd_floor = 0;             // what the steps' scatter within blocks implies for it (the interval uses the larger)
  double sd_log_energy = 0;        // idem, energy per step
};

// The estimate over `quads`; slowdown and saving intervals need at least 2 quads (with one the interval is the
// point). `confidence` in (0, 1). Quads with no steps in an arm are skipped.
AbEstimate estimate(const std::vector<Quad>& quads, double confidence = 0.95);

// Student's t quantile (Boost.Math), for `df` >= 1 degrees of freedom; p in (0, 1).
double t_quantile(double p, double df);

// Quads needed so that the interval's half-width on a ratio is at most `resolution` (a fraction), when quads'
// log-ratios scatter with standard deviation `sd_log`: the smallest Q >= 2 with t(Q-1) sd / sqrt(Q) <= resolution.
// Capped at `max_quads` (returned as is when even that does not resolve it).
std::size_t quads_to_resolve(double sd_log, double resolution, double confidence = 0.95,
                             std::size_t max_quads = 1'000'000);

}  // namespace gearshift::verify
