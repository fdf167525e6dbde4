// Which time law a kernel follows, and the one rule by which a fit takes the roofline law over the additive one.
// Shared by the one-memory-clock sweep fit (model/fit.hpp, fit_kernel) and the clock-pair fit of
// `gearshift calibrate` (model/calibration_sweep.hpp, fit_time_pairs), so that the two choose alike.
//
//   additive   t = T_c + A/f + B/m            (memory and SM work do not overlap)
//   roofline   t = T_c + max(A/f, B/m)        (the slower of SM work and memory traffic bounds the kernel)
//
// The roofline form is the roofline model's (Williams, Waterman, Patterson, "Roofline", CACM 52(4), 2009): a
// kernel's time is the larger of its work over the peak compute rate and its traffic over the peak bandwidth;
// under DVFS the compute rate scales with the SM clock f and the DRAM bandwidth with the memory clock m, so the
// two terms are A/f and B/m. T_c ≥ 0 is what neither clock moves (launch latency, synchronisation).
#pragma once

namespace gearshift::model {

enum class TimeLaw {
  additive,  // t = T_c + A/f (+ B/m)
  roofline,  // t = max(T_mem, A/f) in fit_kernel; T_c + max(A/f, B/m) in fit_time_pairs and DvfsModel::predict
};

// Relative. The measured scatter of kernel times about a smooth law: above the scatter of measured times about
// a 1/f law below 1300 MHz in the Perseus A100 sweeps (90 % of points within 0.31 %, median 0.09 %), so noise
// alone rarely bends the law. FitOptions::kink_tolerance's default.
inline constexpr double kDefaultKinkTolerance = 0.005;

// The choice (both fits' own test that the roofline has samples on both sides of its kink comes first): the
// roofline is taken only when the additive law misses a sample by more than `kink_tolerance` and the roofline
// misses its samples less. Errors are the largest |modelled/measured − 1| over the fit's samples.
inline bool roofline_preferred(double additive_max_rel_error, double roofline_max_rel_error, double kink_tolerance) {
  return additive_max_rel_error > kink_tolerance && roofline_max_rel_error < additive_max_rel_error;
}

}  // namespace gearshift::model
