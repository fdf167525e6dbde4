// The calibration sweep's fitting core (model/calibration_sweep.hpp) on a stand-in job whose kernels follow a
// hidden truth per locked clock pair: the fitted time coefficients give the truth's plan saving. (Power is not
// fitted here: the stand-in's activities are the truth's; `gearshift calibrate` itself is not built.)
#include <gtest/gtest.h>

#include "model/calibration_sweep.hpp"
#include "sim/evaluate.hpp"

namespace gearshift::sim {
namespace {

TEST(CalibrationRecovery, FittedCoefficientsGiveTheHiddenTruthsPlan) {
  const model::DvfsModel m(gpu::find_spec("h200"));
  // Hidden truth: three kernels whose a/b are far from their class priors (as the kernel sweeps show).
  struct K {
    model::KernelClass cls;
    double a, b, t_ns;
  };
  const K hidden[] = {{model::KernelClass::gemm, 0.55, 0.30, 4e6},
                      {model::KernelClass::elementwise, 0.60, 0.30, 2e6},
                      {model::KernelClass::reduction_norm, 0.20, 0.70, 1e6}};
  model::Workload truth, fitted, priors;
  const auto pairs = model::calibration_pairs(m.spec(), 1200, 5);
  for (const K& k : hidden) {
    model::WorkloadOp op;
    op.cls = k.cls;
    op.coeffs = model::class_prior(k.cls);
    op.coeffs.sm_share = k.a, op.coeffs.mem_share = k.b;
    op.ref = m.default_reference(op.coeffs);
    op.ref_time_ns = k.t_ns;
    op.stream = 7;
    truth.ops.push_back(op);
    // The sweep: the stand-in's duration at each locked pair, as the truth model gives it.
    std::vector<model::PairSample> s;
    // The SM clock is the one it ran at (sampled): a capped GEMM runs below the locked clock.
    for (const auto& c : pairs) {
      const model::Prediction p = m.predict(k.t_ns, op.ref, c, op.coeffs);
      s.push_back({{p.effective_sm_mhz, c.mem_mhz}, p.time_ns});
    }
    const model::TimeFit f = model::fit_time_pairs(s, op.ref);
    EXPECT_NEAR(f.sm_share, k.a, 0.01);
    EXPECT_NEAR(f.mem_share, k.b, 0.01);
    model::WorkloadOp g = op;
    g.coeffs.sm_share = f.sm_share, g.coeffs.mem_share = f.mem_share;
    fitted.ops.push_back(g);
    model::WorkloadOp p = op;
    p.coeffs = model::class_prior(k.cls);
    p.ref = m.default_reference(p.coeffs);
    priors.ops.push_back(p);
  }
  EvaluateOptions o;
  o.max_slowdown = 0.02;
  o.frontier_slowdowns = {};
  auto saving = [&](const model::Workload& w) {
    for (const auto& s : evaluate(w, m, o).strategies)
      if (s.schedule.strategy == plan::Strategy::kernel_global) return s.saving_pct;
    return -1.0;
  };
  const double st = saving(truth), sf = saving(fitted), sp = saving(priors);
  EXPECT_GT(st, 0.5);
  EXPECT_NEAR(sf, st, 0.05);         // the fitted model plans the truth's saving (percentage points)
  EXPECT_GT(std::abs(sp - st), 0.3);  // while the class priors miss it by more than 6 times that
}

}  // namespace
}  // namespace gearshift::sim
