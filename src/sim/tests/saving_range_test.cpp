#include "sim/saving_range.hpp"

#include <gtest/gtest.h>

#include "model/prior_spread.hpp"
#include "sim/simulator.hpp"

namespace gearshift::sim {
namespace {

model::WorkloadOp op_of(model::KernelClass cls, double t_ns, const model::DvfsModel& m) {
  model::WorkloadOp op;
  op.cls = cls;
  op.coeffs = model::class_prior(cls);
  op.ref_time_ns = t_ns;
  op.ref = m.default_reference(op.coeffs);
  op.stream = 7;
  return op;
}

struct RangeFixture : ::testing::Test {
  model::DvfsModel m{gpu::find_spec("h200")};
  model::Workload w;
  void SetUp() override {
    w.ops = {op_of(model::KernelClass::gemm, 4e6, m), op_of(model::KernelClass::elementwise, 2e6, m),
             op_of(model::KernelClass::reduction_norm, 1e6, m)};
  }
};

TEST_F(RangeFixture, TheDefaultPlanSavesNothingInEveryDraw) {
  const SavingRange r = saving_range(w, m, default_schedule(w, m), 0, 0.005, {.samples = 50});
  EXPECT_EQ(r.samples, 50);
  EXPECT_DOUBLE_EQ(r.saving_low_pct, 0);
  EXPECT_DOUBLE_EQ(r.saving_expected_pct, 0);
  EXPECT_DOUBLE_EQ(r.saving_high_pct, 0);
  EXPECT_DOUBLE_EQ(r.p_over_budget, 0);  // a draw's baseline against itself: no slowdown
}

TEST_F(RangeFixture, AMemoryBoundPhaseAtALowClockHasARangeAroundItsSaving) {
  // The elementwise and reduction ops at 1200 MHz: modelled to save energy and cost little time.
  plan::Schedule s = default_schedule(w, m);
  s.clocks[1] = s.clocks[2] = {1200, 3201};
  const SimResult base = simulate(w, m, default_schedule(w, m), 0), plan = simulate(w, m, s, 0);
  const double expected = (base.energy_j - plan.energy_j) / base.energy_j * 100;
  const SavingRange r = saving_range(w, m, s, 0, 0.01, {.samples = 300});
  EXPECT_NEAR(r.saving_expected_pct, expected, 1e-9);
  EXPECT_DOUBLE_EQ(r.time_expected_ns, plan.step_time_ns);
  EXPECT_LT(r.saving_low_pct, r.saving_expected_pct);
  EXPECT_GT(r.saving_high_pct, r.saving_expected_pct);
  EXPECT_LT(r.time_low_ns, r.time_high_ns);
  EXPECT_LE(r.slowdown_low_pct, r.slowdown_high_pct);
  // Modelled slowdown at 1200 MHz: (2·(0.15·0.65) + 1·(0.30·0.65)) ms over 7 ms ≈ 5.6 % at the priors, over a
  // 1 % budget unless both drawn a's fall near 0 (σ_a 0.67 and 0.58): most draws exceed it; a 20 % budget
  // needs both a's near 1, and fewer draws exceed it; the share falls as the budget grows.
  EXPECT_GT(r.p_over_budget, 0.7);
  double last = r.p_over_budget;
  for (double eps : {0.05, 0.10, 0.20}) {
    const double p = saving_range(w, m, s, 0, eps, {.samples = 300}).p_over_budget;
    EXPECT_LE(p, last) << eps;
    last = p;
  }
  EXPECT_LT(last, 0.2);
  // A fixed seed: the same range twice; another seed another (but close) range.
  const SavingRange again = saving_range(w, m, s, 0, 0.01, {.samples = 300});
  EXPECT_EQ(again.saving_low_pct, r.saving_low_pct);
  EXPECT_EQ(again.time_high_ns, r.time_high_ns);
  const SavingRange other = saving_range(w, m, s, 0, 0.01, {.samples = 300, .seed = 7});
  EXPECT_NE(other.saving_low_pct, r.saving_low_pct);
  EXPECT_NEAR(other.saving_low_pct, r.saving_low_pct, 0.3 * std::abs(r.saving_expected_pct) + 0.5);
}

TEST_F(RangeFixture, DrawsKeepTheMeasuredPowerAndTheGemmSag) {
  // A GEMM-only step at a lower clock: the GEMMs keep the activity their observed sag at the cap fixes, so the
  // activity draws leave the step's power alone and only the drawn a moves the saving; unconditioned draws also
  // move the GEMMs' power (off the sag, into or out of the cap) and widen the range.
  model::Workload g;
  g.ops = {op_of(model::KernelClass::gemm, 4e6, m), op_of(model::KernelClass::gemm, 2e6, m)};
  plan::Schedule s = default_schedule(g, m);
  s.clocks[0] = s.clocks[1] = {1600, 3201};
  const SavingRange c = saving_range(g, m, s, 0, 0.05, {.samples = 300});
  const SavingRange u = saving_range(g, m, s, 0, 0.05, {.samples = 300, .level_normalised = false});
  EXPECT_EQ(c.draws_rejected, 0);
  EXPECT_LE(c.saving_low_pct, c.saving_expected_pct);
  EXPECT_GE(c.saving_high_pct, c.saving_expected_pct);
  EXPECT_LT(c.saving_high_pct - c.saving_low_pct, u.saving_high_pct - u.saving_low_pct);
  // With the fixture's three classes: the other classes are scaled back to the calibrated power, nothing is
  // rejected, and the range holds the expected saving.
  plan::Schedule t = default_schedule(w, m);
  t.clocks[1] = t.clocks[2] = {1200, 3201};
  const SavingRange r = saving_range(w, m, t, 0, 0.01, {.samples = 300});
  EXPECT_EQ(r.draws_rejected, 0);
  EXPECT_LE(r.saving_low_pct, r.saving_expected_pct);
  EXPECT_GE(r.saving_high_pct, r.saving_expected_pct);
  EXPECT_GT(r.share_below_expected, 0);
  EXPECT_LT(r.share_below_expected, 1);
}

TEST_F(RangeFixture, BadOptionsAreRefused) {
  const plan::Schedule s = default_schedule(w, m);
  EXPECT_THROW(saving_range(w, m, s, 0, 0.005, {.samples = 0}), std::invalid_argument);
  EXPECT_THROW(saving_range(w, m, s, 0, 0.005, {.low_quantile = 0.9, .high_quantile = 0.1}), std::invalid_argument);
}

TEST(PriorSpread, PerturbKeepsSharesInRange) {
  const auto c = model::class_prior(model::KernelClass::elementwise);  // a 0.15, b 0.75
  auto p = model::perturb(c, 0.5, std::log(2.0));
  EXPECT_DOUBLE_EQ(p.sm_share, 0.65);
  EXPECT_DOUBLE_EQ(p.mem_share, 0.35);  // b ≤ 1 − a
  EXPECT_DOUBLE_EQ(p.activity, 2 * c.activity);
  EXPECT_DOUBLE_EQ(model::perturb(c, -1, 0).sm_share, 0);
  EXPECT_DOUBLE_EQ(model::perturb(c, 2, 0).sm_share, 1);
  // A roofline kernel of a model file (its terms overlap, kernel_class.hpp): b stays, and stays its law's.
  model::KernelCoefficients r = c;
  r.sm_share = 0.90, r.mem_share = 0.95, r.time_law = model::TimeLaw::roofline;
  const auto rp = model::perturb(r, 0.05, 0);
  EXPECT_DOUBLE_EQ(rp.sm_share, 0.95);
  EXPECT_DOUBLE_EQ(rp.mem_share, 0.95);  // not 1 − a' = 0.05: that would make it SM-bound
  EXPECT_EQ(rp.time_law, model::TimeLaw::roofline);
  // Standard normal draws: mean ≈ 0, variance ≈ 1, reproducible.
  model::NormalDraws d(1), e(1);
  double s = 0, s2 = 0;
  for (int i = 0; i < 20000; ++i) {
    const double x = d.next();
    EXPECT_EQ(x, e.next());
    s += x, s2 += x * x;
  }
  EXPECT_NEAR(s / 20000, 0, 0.03);
  EXPECT_NEAR(s2 / 20000, 1, 0.05);
}

// The expected saving outside its own range is said, with the draws' median; inside it, nothing is added.
TEST(SavingRange, SaysWhenTheExpectedSavingLiesOutsideTheRange) {
  SavingRange r;
  r.samples = 200;
  r.saving_low_pct = 0.05, r.saving_expected_pct = 2.50, r.saving_high_pct = 2.31;
  r.share_below_expected = 0.97, r.saving_median_pct = 1.42;
  EXPECT_EQ(expected_outside_range(r), "the expected 2.50 % lies above the range: 97.0 % of the draws save less, their "
                                       "median 1.42 %; read it as an upper figure");
  r.saving_expected_pct = 0.01, r.share_below_expected = 0.02;
  EXPECT_EQ(expected_outside_range(r), "the expected 0.01 % lies below the range: 2.0 % of the draws save less, their "
                                       "median 1.42 %; read it as a lower figure");
  r.saving_expected_pct = 2.31;  // on the edge: held
  EXPECT_EQ(expected_outside_range(r), "");
  r.saving_expected_pct = 9, r.samples = 0;  // no draws: no range to lie outside
  EXPECT_EQ(expected_outside_range(r), "");
  // The other reading widens the range until it holds the expected figure: then nothing is said.
  r.samples = 200, r.saving_expected_pct = 2.50;
  include_other_reading(r, 2.60);
  EXPECT_EQ(expected_outside_range(r), "");
}

}  // namespace
}  // namespace gearshift::sim
