#include "model/calibration_sweep.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "model/prior_spread.hpp"

namespace gearshift::model {
namespace {

using ::testing::HasSubstr;

struct Hidden {
  double tc = 0.2e6, a = 1.5e9, b = 0.9e9;  // ns, ns·MHz, ns·MHz: the stand-in kernel's truth
  double t(ClockPair c) const { return tc + a / c.sm_mhz + b / c.mem_mhz; }
};

TEST(CalibrationPairs, DefaultFirstThenBothMemoryClocksAndLowSmClocks) {
  const auto spec = gpu::find_spec("h200");  // memory 2201 and 3201 MHz
  const auto p = calibration_pairs(spec, 1200, 4);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0], (ClockPair{1980, 3201}));
  bool low_mem = false, low_sm = false;
  for (const auto& c : p) {
    EXPECT_GE(c.sm_mhz, 1200);
    low_mem |= c.mem_mhz == 2201;
    low_sm |= c.sm_mhz < 1500;
  }
  EXPECT_TRUE(low_mem);  // B is observable only across memory clocks
  EXPECT_TRUE(low_sm);   // A only across SM clocks
  EXPECT_EQ(calibration_pairs(spec, 1200, 4), p);  // deterministic
  EXPECT_THROW(calibration_pairs(spec, 1200, 0), std::invalid_argument);
  EXPECT_THROW(calibration_pairs(spec, 5000, 3), std::invalid_argument);
}

TEST(FitTimePairs, RecoversTheHiddenTruthFromTheChosenPairs) {
  const auto spec = gpu::find_spec("h200");
  const Hidden h;
  std::vector<PairSample> s;
  for (const auto& c : calibration_pairs(spec, 1200, 4)) s.push_back({c, h.t(c)});
  const ClockPair ref{1980, 3201};
  const TimeFit f = fit_time_pairs(s, ref);
  EXPECT_NEAR(f.clock_independent_ns, h.tc, 1e-3);
  EXPECT_NEAR(f.sm_scaled_ns_mhz, h.a, 1e0);
  EXPECT_NEAR(f.mem_scaled_ns_mhz, h.b, 1e0);
  EXPECT_NEAR(f.t_ref_ns, h.t(ref), 1e-6);
  EXPECT_NEAR(f.sm_share, h.a / 1980 / h.t(ref), 1e-9);
  EXPECT_NEAR(f.mem_share, h.b / 3201 / h.t(ref), 1e-9);
  EXPECT_LT(f.rms_relative_error, 1e-12);
}

TEST(FitTimePairs, NoisyDurationsStillGiveAAndBWithinTolerance) {
  const auto spec = gpu::find_spec("h200");
  const Hidden h;
  NormalDraws noise(3);
  std::vector<PairSample> s;
  for (const auto& c : calibration_pairs(spec, 1200, 6)) s.push_back({c, h.t(c) * (1 + 0.005 * noise.next())});
  const ClockPair ref{1980, 3201};
  const TimeFit f = fit_time_pairs(s, ref);
  // 0.5 % noise on 6 pairs: a and b within 0.05 of the truth (a = 0.53, b = 0.20 at the default pair).
  EXPECT_NEAR(f.sm_share, h.a / 1980 / h.t(ref), 0.05);
  EXPECT_NEAR(f.mem_share, h.b / 3201 / h.t(ref), 0.05);
  EXPECT_LT(f.rms_relative_error, 0.01);
}

TEST(FitTimePairs, TermsStayNonNegativeAndBadInputIsRefused) {
  // A time that rises with the SM clock (the Spmv case) cannot give A < 0: A = 0, the rest explains it.
  std::vector<PairSample> s = {{{1980, 3201}, 1.10e6}, {{1500, 3201}, 1.00e6}, {{1200, 3201}, 0.95e6}};
  const TimeFit f = fit_time_pairs(s, {1980, 3201});
  EXPECT_GE(f.sm_scaled_ns_mhz, 0);
  EXPECT_GE(f.clock_independent_ns, 0);
  EXPECT_EQ(f.mem_scaled_ns_mhz, 0);  // one memory clock: B not observable
  auto msg = [](const std::vector<PairSample>& v) {
    try {
      fit_time_pairs(v, {1980, 3201});
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(msg({{{1980, 3201}, 1}}), HasSubstr("need at least 3 samples"));
  EXPECT_THAT(msg({{{1980, 3201}, 1}, {{1980, 2201}, 1.1}, {{1980, 3201}, 1}}), HasSubstr("2 or more distinct SM clocks"));
  EXPECT_THAT(msg({{{1980, 3201}, 1}, {{1500, 2201}, NAN}, {{1200, 3201}, 1}}), HasSubstr("sample 1"));
}

}  // namespace
}  // namespace gearshift::model
