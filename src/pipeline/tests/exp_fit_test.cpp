#include <cmath>

#include <gtest/gtest.h>

#include "pipeline/exp_fit.hpp"

using namespace gearshift::pipeline;

TEST(ExpFit, RecoversExactExponential) {
  std::vector<double> x, y;
  for (int d = 50; d <= 63; ++d) {
    x.push_back(d);
    y.push_back(42000.0 * std::exp(-0.16 * d) + 10.0);
  }
  auto f = fit_exponential(x, y);
  EXPECT_NEAR(f.b, -0.16, 1e-7);
  EXPECT_NEAR(f.a() / 42000.0, 1.0, 1e-5);
  EXPECT_NEAR(f.c, 10.0, 1e-5);
  EXPECT_LT(f.mse, 1e-12);
  EXPECT_NEAR(f(55), 42000.0 * std::exp(-0.16 * 55) + 10.0, 1e-7);
}

TEST(ExpFit, IncreasingDataClampsAToZero) {
  auto f = fit_exponential({1, 2, 3}, {1, 2, 3});
  EXPECT_EQ(f.a0, 0.0);
  EXPECT_DOUBLE_EQ(f.c, 2.0);
  EXPECT_NEAR(f.mse, 2.0 / 3.0, 1e-12);
}
