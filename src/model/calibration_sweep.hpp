// The fitting core of a calibration sweep (issue 20 part 4; `gearshift calibrate`, src/cli/cmd_calibrate.cpp,
// runs the job at the pairs and writes the model file, sim/calibration_model.hpp): which locked (SM, memory)
// clock pairs to measure, and each kernel's time coefficients from its mean duration at them.
//
//   t(f, m) = T_c + A/f + B/m            additive (the default)    T_c [ns], A [ns·MHz], B [ns·MHz]; all ≥ 0
//   t(f, m) = T_c + max(A/f, B/m)        roofline (model/time_law.hpp; the roofline model, Williams et al. 2009)
//   a = (A/f_ref)/t(ref), b = (B/m_ref)/t(ref)   (KernelCoefficients::sm_share, mem_share at `ref`)
//
// The same laws as DvfsModel::predict's t_ref·(a·f_ref/f + b·m_ref/m + 1 − a − b) and, for a roofline kernel,
// t_ref·(max(a·f_ref/f, b·m_ref/m) + 1 − max(a, b)), written in absolute terms.
#pragma once

#include <vector>

#include "gpu/spec.hpp"
#include "model/dvfs_model.hpp"
#include "model/time_law.hpp"

namespace gearshift::model {

struct PairSample {
  ClockPair clocks;   // the clocks it ran at, MHz: the sampled SM clock (a capped kernel runs below the locked one)
  double time_ns = 0;  // mean duration of the kernel there, ns (> 0; a mean of measured whole ns)
};

struct TimeFit {
  TimeLaw law = TimeLaw::additive;  // the law chosen (header comment)
  double clock_independent_ns = 0, sm_scaled_ns_mhz = 0, mem_scaled_ns_mhz = 0;  // T_c [ns], A, B [ns·MHz]
  ClockPair ref;
  double t_ref_ns = 0;              // modelled time at ref, ns
  double sm_share = 0, mem_share = 0;  // a, b at ref (roofline: the two terms over t_ref; each ≤ 1, sum may be > 1)
  double rms_relative_error = 0;    // of the chosen law over the samples
  double max_relative_error = 0;    // its largest |modelled/measured − 1| over the samples
};

// Least squares (on relative error) of t = T_c + A/f + B/m with T_c, A, B ≥ 0: the best of the fits on every
// subset of the three terms whose coefficients are all ≥ 0. Then the roofline T_c + max(A/f, B/m) (A, B > 0):
// for each split of the samples ordered by f/m into an SM-bound lower and a memory-bound upper part, the same
// least squares of T_c + A/f on the one and T_c + B/m on the other, evaluated as the max over all samples and
// kept only with a sample strictly on each side of its kink; the split with the smallest largest relative
// error. The roofline is chosen by model::roofline_preferred (the rule fit_kernel uses): only when the additive
// law misses a sample by more than `kink_tolerance` (relative; the measured scatter of a sample's mean time) and
// the roofline misses less. It is tried only with 4 or more samples (3 parameters: 3 samples fit any split
// exactly) at 2 or more memory clocks (with one, T_c and B/m cannot be told apart).
// Throws std::invalid_argument for fewer than 3 samples, a non-positive or non-finite time or clock, or samples
// that cannot tell the terms apart (fewer than 2 distinct SM clocks or, when B is to be fitted, 2 distinct memory
// clocks: B is then 0 and said so by mem_share = 0 with one memory clock).
TimeFit fit_time_pairs(const std::vector<PairSample>& samples, ClockPair ref,
                       double kink_tolerance = kDefaultKinkTolerance);

// `count` clock pairs to measure, the spec's default pair first, chosen greedily among the spec's pairs with
// SM clock ≥ min_sm_mhz for the most information per minute of sweep: each next pair maximises the gain in
// det(XᵀX) of the design rows [1, f_def/f, m_def/m] divided by its expected duration (∝ f_def/f: a
// compute-bound step, the slowest case). Throws std::invalid_argument when count < 1 or no SM clock of the
// spec is ≥ min_sm_mhz.
std::vector<ClockPair> calibration_pairs(const gpu::GpuSpec& spec, int min_sm_mhz, int count);

}  // namespace gearshift::model
