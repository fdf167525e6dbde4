#include "model/prior_spread.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace gearshift::model {

PriorSpread prior_spread(KernelClass c) {
  // RMS deviations over the real-suite kernels of the V100, Quadro RTX 8000, GTX Titan X and A100 sweeps
  // (docs/model-validation.md, "Spread of the class priors"); kernel_validation_test checks them.
  switch (c) {
    case KernelClass::gemm: return {0.204, 2.058, 7};
    case KernelClass::elementwise: return {0.673, 1.089, 11};
    case KernelClass::reduction_norm: return {0.583, 0.375, 11};
    case KernelClass::copy_memset: return {0.647, 0.075, 3};
    case KernelClass::other: return {0.393, 1.821, 60};
    case KernelClass::attention:
    case KernelClass::optimizer:
    case KernelClass::communication: break;
  }
  PriorSpread widest{0, 0, 0};
  for (KernelClass m : {KernelClass::gemm, KernelClass::elementwise, KernelClass::reduction_norm,
                        KernelClass::copy_memset, KernelClass::other}) {
    const PriorSpread s = prior_spread(m);
    widest.sm_share_sd = std::max(widest.sm_share_sd, s.sm_share_sd);
    widest.activity_log_sd = std::max(widest.activity_log_sd, s.activity_log_sd);
  }
  return widest;
}

KernelCoefficients perturb(const KernelCoefficients& c, double d_sm_share, double activity_log) {
  KernelCoefficients out = c;
  out.sm_share = std::clamp(c.sm_share + d_sm_share, 0.0, 1.0);
  // A roofline kernel's two terms overlap (kernel_class.hpp): b stays as it is, each term bounded by 1 alone.
  if (c.time_law != TimeLaw::roofline) out.mem_share = std::min(c.mem_share, 1.0 - out.sm_share);
  out.activity = c.activity * std::exp(activity_log);
  return out;
}

double NormalDraws::next() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // Uniforms in (0, 1]: 53 random bits, offset so that log() never sees 0.
  auto uniform = [&] { return (static_cast<double>(rng_() >> 11) + 1.0) * 0x1.0p-53; };
  const double u1 = uniform(), u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(t);
  has_spare_ = true;
  return r * std::cos(t);
}

}  // namespace gearshift::model
