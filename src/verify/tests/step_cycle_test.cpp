#include "verify/step_cycle.hpp"

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace gearshift::verify {
namespace {

// Steps of 255 ms with 1 % noise; every `every`-th 30 % longer (Megatron-LM's logging iteration: 328 ms against
// 252-268 ms, H200); blocks of `block` steps whose clocks add `arm` to every other block's steps.
StepCycle feed(std::size_t every, double extra, std::size_t steps, std::size_t block, double arm, unsigned seed,
               std::size_t max_period = 32) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, 0.01);
  StepCycle c(max_period);
  for (std::size_t i = 0; i < steps; ++i) {
    double s = 0.255 * (1 + noise(rng));
    if (every > 0 && i % every == every - 1) s *= 1 + extra;
    const std::size_t b = i / block;
    if (b % 2 == 1) s *= 1 + arm;
    c.add(s, b);
  }
  return c;
}

TEST(StepCycle, FindsMegatronsLoggingIteration) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    const StepCycle c = feed(10, 0.30, 88, 6, 0, seed);
    EXPECT_EQ(c.period(), 10u) << seed;
    EXPECT_TRUE(c.whole(20));  // two cycles: each half of the block one
    EXPECT_TRUE(c.whole(40));
    EXPECT_FALSE(c.whole(10));
    EXPECT_FALSE(c.whole(8));
    EXPECT_NE(c.why().find("a cycle of 10 "), std::string::npos) << c.why();
    EXPECT_NEAR(std::stod(c.why().substr(c.why().find("its slowest step ") + 17)), 1.30, 0.03) << c.why();
  }
}

// Noise alone, a trend, or blocks whose clocks differ by far more than the noise (a 5 % plan at 0.2 % noise): no
// cycle, blocks are cut as before.
TEST(StepCycle, NoCycleInNoiseOrInTheArms) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    const StepCycle noise = feed(0, 0, 512, 6, 0, seed);
    EXPECT_EQ(noise.period(), 0u) << seed << ": " << noise.why();
    EXPECT_TRUE(noise.whole(7));
    const StepCycle arms = feed(0, 0, 512, 6, 0.05, seed);
    EXPECT_EQ(arms.period(), 0u) << seed << ": " << arms.why();
  }
  // A job slowing by 5 % over 512 steps under 1 % noise. (Noise-free, a trend within blocks of 6 steps, each step
  // over its block's mean, is a sawtooth of period 6: a cycle of the blocks. Were one found, blocks would only be
  // longer: at most 2 x max_period steps.)
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0, 0.01);
  StepCycle trend;
  for (std::size_t i = 0; i < 512; ++i) trend.add(0.1 * (1 + 0.05 * static_cast<double>(i) / 512 + noise(rng)), i / 6);
  EXPECT_EQ(trend.period(), 0u) << trend.why();
}

// A cycle longer than looked for, or fewer steps than eight cycles' worth: none yet.
TEST(StepCycle, NeedsEightCyclesOfSteps) {
  EXPECT_EQ(feed(10, 0.30, 72, 6, 0, 1).period(), 0u);
  EXPECT_EQ(feed(40, 0.30, 512, 6, 0, 1).period(), 0u);
  EXPECT_EQ(feed(10, 0.30, 512, 6, 0, 1, /*max_period=*/0).period(), 0u);  // looking switched off
}

TEST(StepCycle, ShareIsTheVarianceThePlaceExplains) {
  EXPECT_DOUBLE_EQ(StepCycle::share({1, 2, 1, 2, 1, 2}, 2), 1.0);
  EXPECT_DOUBLE_EQ(StepCycle::share({1, 2, 1, 2, 1, 2}, 3), 0.0);
  EXPECT_DOUBLE_EQ(StepCycle::share({1, 1, 1}, 2), 0.0);
}

}  // namespace
}  // namespace gearshift::verify
