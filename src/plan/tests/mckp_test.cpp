#include "plan/mckp.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace gearshift::plan {
namespace {

struct Instance {
  std::size_t groups, options;
  std::vector<double> time, energy;
  MckpInstance view() const { return {groups, options, time.data(), energy.data()}; }
};

// Random DVFS-like options: faster options cost more energy, with noise and dominated points.
Instance random_instance(std::mt19937& rng, std::size_t groups, std::size_t options) {
  Instance in{groups, options, {}, {}};
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (std::size_t g = 0; g < groups; ++g) {
    double base_t = 10 + 90 * u(rng), base_e = 1 + 9 * u(rng);
    for (std::size_t o = 0; o < options; ++o) {
      double speed = 0.5 + 0.5 * static_cast<double>(o) / static_cast<double>(options - 1);
      in.time.push_back(base_t / speed * (1 + 0.1 * u(rng)));
      in.energy.push_back(base_e * (0.6 + speed * speed) * (1 + 0.15 * u(rng)));
    }
  }
  return in;
}

TEST(Mckp, MatchesBruteForceWithinItsProvenGap) {
  std::mt19937 rng(7);
  int exact = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Instance in = random_instance(rng, 4, 5);
    double tmin = 0, tmax = 0;
    for (std::size_t g = 0; g < in.groups; ++g) {
      double lo = 1e300, hi = 0;
      for (std::size_t o = 0; o < in.options; ++o) lo = std::min(lo, in.time[g * 5 + o]), hi = std::max(hi, in.time[g * 5 + o]);
      tmin += lo, tmax += hi;
    }
    double budget = tmin + (tmax - tmin) * (0.1 + 0.8 * (trial % 10) / 10.0);
    MckpResult brute = solve_mckp_brute_force(in.view(), budget);
    MckpResult r = solve_mckp(in.view(), budget);
    ASSERT_TRUE(brute.feasible);
    ASSERT_TRUE(r.feasible);
    EXPECT_LE(r.time, budget + 1e-9);
    EXPECT_LE(r.lower_bound, brute.energy + 1e-9) << "the bound must be a lower bound";
    EXPECT_GE(r.energy, brute.energy - 1e-9) << "cannot beat the optimum";
    EXPECT_LE(r.energy, r.lower_bound * (1 + r.gap) + 1e-9);
    EXPECT_EQ(r.gap, 0) << "proven optimal";
    exact += std::abs(r.energy - brute.energy) < 1e-9;
  }
  EXPECT_EQ(exact, 300) << "the branch and bound proves the optimum of every small instance";
}

TEST(Mckp, LargeInstanceFitsAndReportsAValidGap) {
  std::mt19937 rng(11);
  Instance in = random_instance(rng, 2000, 40);
  double tmin = 0, tmax = 0;
  for (std::size_t g = 0; g < in.groups; ++g) {
    tmin += *std::min_element(in.time.begin() + static_cast<long>(g * 40), in.time.begin() + static_cast<long>(g * 40 + 40));
    tmax += *std::max_element(in.time.begin() + static_cast<long>(g * 40), in.time.begin() + static_cast<long>(g * 40 + 40));
  }
  for (double f : {0.0, 0.2, 0.7, 1.0}) {
    const double budget = tmin + (tmax - tmin) * f;
    MckpResult r = solve_mckp(in.view(), budget);
    ASSERT_TRUE(r.feasible);
    EXPECT_LE(r.time, budget * (1 + 1e-9));
    EXPECT_LE(r.lower_bound, r.energy);
    EXPECT_GE(r.gap, 0);
    EXPECT_LE(r.gap, 1e-4) << "budget fraction " << f;
  }
}

TEST(Mckp, UnconstrainedBudgetGivesEachGroupItsCheapestOption) {
  Instance in{2, 3, {3, 2, 1, 5, 4, 3}, {1, 2, 3, 9, 1, 2}};
  MckpResult r = solve_mckp(in.view(), 1e9);
  EXPECT_EQ(r.choice, (std::vector<std::size_t>{0, 1}));
  EXPECT_DOUBLE_EQ(r.energy, 2);
  EXPECT_DOUBLE_EQ(r.gap, 0);
}

TEST(Mckp, InfeasibleBudgetReturnsFastestAndSaysSo) {
  Instance in{2, 2, {3, 1, 3, 1}, {1, 2, 1, 2}};
  MckpResult r = solve_mckp(in.view(), 1.5);
  EXPECT_FALSE(r.feasible);
  EXPECT_EQ(r.choice, (std::vector<std::size_t>{1, 1}));
}

}  // namespace
}  // namespace gearshift::plan
