#include "verify/estimate.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace gearshift::verify {
namespace {

Quad quad(double plan_step_s, double base_step_s, double plan_w, double base_w, std::uint64_t steps = 10) {
  Quad q;
  q.plan = {steps, plan_step_s * static_cast<double>(steps), plan_w * 1.0, 1.0};
  q.base = {steps, base_step_s * static_cast<double>(steps), base_w * 1.0, 1.0};
  return q;
}

TEST(Estimate, TQuantileMatchesTables) {
  EXPECT_NEAR(t_quantile(0.975, 1), 12.706, 1e-3);
  EXPECT_NEAR(t_quantile(0.975, 4), 2.776, 1e-3);
  EXPECT_NEAR(t_quantile(0.975, 30), 2.042, 1e-3);
  EXPECT_THROW(t_quantile(0.975, 0.5), std::invalid_argument);
}

TEST(Estimate, ExactRatiosGiveAZeroWidthInterval) {
  const AbEstimate e = estimate({quad(1.01, 1.0, 90, 100), quad(1.01, 1.0, 90, 100), quad(1.01, 1.0, 90, 100)});
  EXPECT_EQ(e.quads, 3u);
  EXPECT_EQ(e.steps, 60u);
  EXPECT_NEAR(e.slowdown.estimate, 0.01, 1e-12);
  EXPECT_NEAR(e.slowdown.lo, 0.01, 1e-12);
  EXPECT_NEAR(e.slowdown.hi, 0.01, 1e-12);
  ASSERT_TRUE(e.saving);
  // energy per step: 90 W x 1.01 s against 100 W x 1 s
  EXPECT_NEAR(e.saving->estimate, 1 - 0.909, 1e-12);
}

TEST(Estimate, IntervalIsTheStudentTIntervalOfTheLogRatios) {
  const double r[] = {1.00, 1.02, 1.01, 1.03};
  std::vector<Quad> q;
  for (double x : r) q.push_back(quad(x, 1.0, 100, 100));
  const AbEstimate e = estimate(q);
  double m = 0;
  for (double x : r) m += std::log(x);
  m /= 4;
  double ss = 0;
  for (double x : r) ss += (std::log(x) - m) * (std::log(x) - m);
  const double sd = std::sqrt(ss / 3), h = 3.182446 * sd / 2;
  EXPECT_NEAR(e.slowdown.estimate, std::exp(m) - 1, 1e-12);
  EXPECT_NEAR(e.slowdown.lo, std::exp(m - h) - 1, 1e-6);
  EXPECT_NEAR(e.slowdown.hi, std::exp(m + h) - 1, 1e-6);
  EXPECT_NEAR(e.sd_log_time, sd, 1e-12);
}

TEST(Estimate, ALinearDriftAcrossAnAbbaQuadCancels) {
  // Blocks at times 0..3 with a step time rising 1 % per block; plan = baseline in truth.
  Quad q;
  const double t[] = {1.00, 1.01, 1.02, 1.03};  // A B B A
  q.plan = {20, 10 * (t[0] + t[3]), 0, 0};
  q.base = {20, 10 * (t[1] + t[2]), 0, 0};
  const AbEstimate e = estimate({q, q});
  EXPECT_NEAR(e.slowdown.estimate, 0, 1e-12);
  EXPECT_FALSE(e.saving);  // no energy windows
}

TEST(Estimate, QuadsWithoutEnergyGiveNoSaving) {
  Quad a = quad(1.0, 1.0, 100, 100);
  a.plan.energy_seconds = 0;
  const AbEstimate e = estimate({a, quad(1.0, 1.0, 100, 100)});
  EXPECT_EQ(e.quads, 2u);
  EXPECT_EQ(e.energy_quads, 1u);
  EXPECT_FALSE(e.saving);
}

TEST(Estimate, QuadsToResolve) {
  EXPECT_EQ(quads_to_resolve(0, 0.005), 2u);
  // sd 1 %, resolution 0.5 %: t(Q-1)·0.01/sqrt(Q) <= 0.005 first at Q = 18 (2.110·0.01/4.243 = 0.00497)
  EXPECT_EQ(quads_to_resolve(0.01, 0.005), 18u);
  EXPECT_EQ(quads_to_resolve(1.0, 1e-6, 0.95, 100), 100u);
  EXPECT_THROW(quads_to_resolve(0.01, 0), std::invalid_argument);
}

}  // namespace
}  // namespace gearshift::verify
