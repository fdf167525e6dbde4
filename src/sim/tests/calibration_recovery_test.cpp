// The calibration sweep's fitting core (model/calibration_sweep.hpp) on a stand-in job whose kernels follow a
// hidden truth per locked clock pair: the fitted time coefficients give the truth's plan saving. (Power is not
// fitted here: the stand-in's activities are the truth's; `gearshift calibrate` itself is not built.)
#include <gtest/gtest.h>

#include <cstdio>

#include "model/calibration_sweep.hpp"
#include "sim/evaluate.hpp"
#include "sim/simulator.hpp"

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

// A roofline-shaped hidden truth (model/time_law.hpp): a memory-bound kernel (SM term 0.90, memory term 0.95 of
// its time at the default pair; kink at 1876 MHz) beside a compute-bound GEMM. The fit chooses the roofline and
// recovers it, and its plan keeps the truth's step within the 2 % budget; the same kernel reduced to its local
// a, b at the default pair (a = 0: lowering the SM clock looks free to any clock) plans a step that over-runs it.
TEST(CalibrationRecovery, ARooflineKernelsPlanStaysWithinTheStepTimeBudget) {
  const model::DvfsModel m(gpu::find_spec("h200"));
  model::Workload truth, fitted, local;
  const auto pairs = model::calibration_pairs(m.spec(), 1200, 4);
  auto add = [&](model::KernelClass cls, double a, double b, model::TimeLaw law, double t_ns) {
    model::WorkloadOp op;
    op.cls = cls;
    op.coeffs = model::class_prior(cls);
    op.coeffs.sm_share = a, op.coeffs.mem_share = b, op.coeffs.time_law = law;
    op.ref = m.default_reference(op.coeffs);
    op.ref_time_ns = t_ns;
    op.stream = 7;
    truth.ops.push_back(op);
    std::vector<model::PairSample> s;
    for (const auto& c : pairs) {
      const model::Prediction p = m.predict(t_ns, op.ref, c, op.coeffs);
      s.push_back({{p.effective_sm_mhz, c.mem_mhz}, p.time_ns});
    }
    const model::TimeFit f = model::fit_time_pairs(s, op.ref);
    EXPECT_EQ(f.law, law);
    EXPECT_NEAR(f.sm_share, a, 0.01);
    EXPECT_NEAR(f.mem_share, b, 0.01);
    model::WorkloadOp g = op;
    g.coeffs.sm_share = f.sm_share, g.coeffs.mem_share = f.mem_share, g.coeffs.time_law = f.law;
    fitted.ops.push_back(g);
    // The local law at the default pair: all of the time above the kink is the memory term's.
    model::WorkloadOp l = op;
    if (law == model::TimeLaw::roofline) l.coeffs.sm_share = 0, l.coeffs.time_law = model::TimeLaw::additive;
    local.ops.push_back(l);
  };
  add(model::KernelClass::gemm, 0.85, 0.05, model::TimeLaw::additive, 4e6);
  add(model::KernelClass::elementwise, 0.90, 0.95, model::TimeLaw::roofline, 6e6);
  EvaluateOptions o;
  o.max_slowdown = 0.02;
  o.frontier_slowdowns = {};
  auto plan = [&](const model::Workload& w) {
    for (const auto& s : evaluate(w, m, o).strategies)
      if (s.schedule.strategy == plan::Strategy::kernel_global) return s.schedule;
    return plan::Schedule{};
  };
  auto saving = [&](const plan::Schedule& s) {
    const double base = simulate(truth, m, default_schedule(truth, m), 0).energy_j;
    return (base - simulate(truth, m, s, 0).energy_j) / base * 100;
  };
  auto step_ms = [&](const plan::Schedule& s) { return simulate(truth, m, s, 0).step_time_ns * 1e-6; };
  const double base_ms = step_ms(default_schedule(truth, m));
  const plan::Schedule pt = plan(truth), pf = plan(fitted), pl = plan(local);
  ASSERT_FALSE(pf.clocks.empty());
  ASSERT_FALSE(pl.clocks.empty());
  EXPECT_LE(step_ms(pf), base_ms * 1.02 + 1e-9);  // the fitted law's plan, run in the truth: within budget
  EXPECT_GT(step_ms(pl), base_ms * 1.05);          // the local a, b's plan over-runs it (by far)
  EXPECT_NEAR(saving(pf), saving(pt), 0.05);       // and the fitted plan saves what the truth's does
  EXPECT_GT(saving(pt), 0.5);
  std::printf("roofline kernel: truth plan %.2f %%, fitted %.2f %% at %.3f ms, local a/b %.2f %% at %.3f ms "
              "(budget %.3f ms)\n",
              saving(pt), saving(pf), step_ms(pf), saving(pl), step_ms(pl), base_ms * 1.02);
}

}  // namespace
}  // namespace gearshift::sim
