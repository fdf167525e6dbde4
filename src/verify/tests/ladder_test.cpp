#include "verify/ladder.hpp"

#include <gtest/gtest.h>

namespace gearshift::verify {
namespace {

Ladder two_positions() {
  Ladder l;
  l.duration_ns = {1e6, 3e6};
  l.plan = {{990, 2619}, {1980, 2619}};
  l.baseline = {1980, 2619};
  for (int f = 345; f <= 1980; f += 15) l.sm_clocks_mhz.push_back(f);
  l.mem_clocks_mhz = {2619};
  return l;
}

TEST(Ladder, EndsAreThePlanAndTheBaseline) {
  const Ladder l = two_positions();
  EXPECT_EQ(l.clocks_at(1), l.plan);
  EXPECT_EQ(l.clocks_at(0), (std::vector<model::ClockPair>{{1980, 2619}, {1980, 2619}}));
  EXPECT_EQ(l.clocks_at(7), l.plan);  // clamped
}

TEST(Ladder, HalfwayIsLinearInTimePerCycleAndSnappedUp) {
  const Ladder l = two_positions();
  // 1/f = (1/1980 + 1/990)/2 -> f = 1320 MHz exactly, a supported clock
  EXPECT_EQ(l.clocks_at(0.5)[0].sm_mhz, 1320);
  // alpha 0.3: 1/f = 1/1980 + 0.3 (1/990 - 1/1980) -> 1523.08 MHz, up to 1530
  EXPECT_EQ(l.clocks_at(0.3)[0].sm_mhz, 1530);
}

TEST(Ladder, ShapeIsTheDurationWeightedAddedTimePerCycle) {
  const Ladder l = two_positions();
  EXPECT_DOUBLE_EQ(l.shape(0), 0);
  EXPECT_DOUBLE_EQ(l.shape(1), (1.0 * (1980.0 / 990 - 1)) / 4);
  EXPECT_NEAR(l.shape(0.5), l.shape(1) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(l.alpha_for_shape(l.shape(1)), 1);
  EXPECT_NEAR(l.alpha_for_shape(l.shape(1) / 2), 0.5, 1.0 / 64);
  EXPECT_DOUBLE_EQ(l.alpha_for_shape(0), 0);
}

TEST(Ladder, NeverBelowThePlanNorAboveTheBaseline) {
  Ladder l = two_positions();
  l.sm_clocks_mhz = {500, 2100};  // a coarse table: the snap may not leave [plan, baseline]
  for (double a : {0.1, 0.5, 0.9}) {
    const auto c = l.clocks_at(a);
    EXPECT_GE(c[0].sm_mhz, 990);
    EXPECT_LE(c[0].sm_mhz, 1980);
  }
}

}  // namespace
}  // namespace gearshift::verify
