// The error model of the kernel-class priors (issue 20, part 3): how far a measured kernel's sm_share a and
// power shape lie from its class prior, as measured on the public kernel sweeps (docs/model-validation.md,
// "Spread of the class priors"; model/kernel_validation.hpp measures it and its test checks these figures).
// Used to sample coefficients for the error bars of a plan's saving (sim/saving_range.hpp) and of the
// validation kernels' mini-plans.
#pragma once

#include <cstdint>
#include <random>

#include "model/kernel_class.hpp"

namespace gearshift::model {

struct PriorSpread {
  double sm_share_sd = 0;      // standard deviation of a about the prior, dimensionless
  double activity_log_sd = 0;  // standard deviation of ln(activity / prior activity)
  int kernels = 0;             // measured kernels behind the figures (0: borrowed from the widest class)
};

// Measured per class; classes without measured kernels (attention, optimizer, communication) take the widest
// measured spread of each figure.
PriorSpread prior_spread(KernelClass c);

// The prior moved by one draw: a' = clamp(a + d_sm_share, 0, 1), b' = min(b, 1 − a') (b' = b for a roofline
// kernel, whose terms overlap), activity' = activity·exp(activity_log). Other fields unchanged.
KernelCoefficients perturb(const KernelCoefficients& c, double d_sm_share, double activity_log);

// Standard normal draws from a fixed-seed 64-bit Mersenne Twister (its output is fixed by the C++ standard;
// the transform is Box–Muller here, so the draws are the same on every standard library).
class NormalDraws {
 public:
  explicit NormalDraws(std::uint64_t seed) : rng_(seed) {}
  double next();

 private:
  std::mt19937_64 rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace gearshift::model
