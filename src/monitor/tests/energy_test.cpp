#include <gtest/gtest.h>

#include "monitor/energy.hpp"

namespace gearshift::monitor {
namespace {

TEST(CounterUnwrapper, CumulativeFromFirstRead) {
  CounterUnwrapper u;
  EXPECT_EQ(u.add(1000), 0u);
  EXPECT_EQ(u.add(1500), 500u);
  EXPECT_EQ(u.add(1500), 500u);
  EXPECT_EQ(u.wraps(), 0);
}

TEST(CounterUnwrapper, Wraps32BitCounter) {
  CounterUnwrapper u;
  u.add((1ULL << 32) - 100);
  EXPECT_EQ(u.add(50), 150u);
  EXPECT_EQ(u.wraps(), 1);
  EXPECT_EQ(u.add(70), 170u);
}

TEST(CounterUnwrapper, Wraps64BitCounter) {
  CounterUnwrapper u;
  u.add(~0ULL - 9);  // 2^64 − 10
  EXPECT_EQ(u.add(5), 15u);
  EXPECT_EQ(u.wraps(), 1);
}

TEST(Tick, DetectedOnlyOnChange) {
  CounterRead a{100, 110, 5000}, b{200, 210, 5000}, c{300, 304, 8000};
  EXPECT_FALSE(detect_tick(a, b));
  auto t = detect_tick(b, c);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->t_lo, 200);
  EXPECT_EQ(t->t_hi, 304);
  EXPECT_EQ(t->time(), 252);
  EXPECT_EQ(t->uncertainty(), 104);
  EXPECT_EQ(t->cumulative_mj, 8000u);
}

TEST(Tick, EnergyAtEdgeExtrapolatesWithPower) {
  // Tick at t = 1.05 s holding 10 000 mJ; 300 W for the 50 ms before it is 15 000 mJ... in J: 15 J.
  Tick t{1'050'000'000 - 1000, 1'050'000'000 + 1000, 100'000};
  EXPECT_NEAR(energy_at(t, 300.0, 1'000'000'000), 100'000 - 15'000, 1e-6);
  EXPECT_NEAR(energy_at(t, 300.0, 1'100'000'000), 100'000 + 15'000, 1e-6);
}

TEST(PowerIntegrator, TrapezoidAndInterpolation) {
  PowerIntegrator p;
  p.add(0, 100);
  p.add(1'000'000'000, 300);  // 1 s ramp 100 -> 300 W: 200 J
  p.add(2'000'000'000, 300);  // +300 J
  EXPECT_NEAR(*p.integral_at(1'000'000'000), 200.0, 1e-9);
  EXPECT_NEAR(*p.integral_at(2'000'000'000), 500.0, 1e-9);
  // Half-way up the ramp, power is 200 W: ∫ = (100+200)/2 × 0.5 = 75 J.
  EXPECT_NEAR(*p.integral_at(500'000'000), 75.0, 1e-9);
  // Outside the samples: constant power.
  EXPECT_NEAR(*p.integral_at(3'000'000'000), 800.0, 1e-9);
  EXPECT_NEAR(*p.integral_at(-1'000'000'000), -100.0, 1e-9);
  EXPECT_NEAR(*p.mean_power(0, 1'000'000'000), 200.0, 1e-9);
  EXPECT_NEAR(*p.mean_power(1'400'000'000, 1'500'000'000), 300.0, 1e-9);  // none inside: nearest
  PowerIntegrator empty;
  EXPECT_FALSE(empty.integral_at(0));
}

TEST(PowerIntegrator, KeepsBoundedHistory) {
  PowerIntegrator p(3);
  for (int i = 0; i < 10; ++i) p.add(i * 1'000'000'000LL, 10);
  EXPECT_EQ(p.points().size(), 3u);
  EXPECT_NEAR(p.points().back().integral_j, 90.0, 1e-9);  // integral survives trimming
}

}  // namespace
}  // namespace gearshift::monitor
