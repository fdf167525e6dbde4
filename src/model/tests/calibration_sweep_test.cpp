#include "model/calibration_sweep.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

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

// A hidden truth's durations at the first four calibration pairs of the H200 (SM >= 1200 MHz).
template <typename Truth>
std::vector<PairSample> at_h200_pairs(const Truth& h) {
  std::vector<PairSample> s;
  for (const auto& c : calibration_pairs(gpu::find_spec("h200"), 1200, 4)) s.push_back({c, h.t(c)});
  return s;
}

TEST(FitTimePairs, RecoversTheHiddenTruthFromTheChosenPairs) {
  const Hidden h;
  const std::vector<PairSample> s = at_h200_pairs(h);
  const ClockPair ref{1980, 3201};
  const TimeFit f = fit_time_pairs(s, ref);
  EXPECT_NEAR(f.clock_independent_ns, h.tc, 1e-3);
  EXPECT_NEAR(f.sm_scaled_ns_mhz, h.a, 1e0);
  EXPECT_NEAR(f.mem_scaled_ns_mhz, h.b, 1e0);
  EXPECT_NEAR(f.t_ref_ns, h.t(ref), 1e-6);
  EXPECT_NEAR(f.sm_share, h.a / 1980 / h.t(ref), 1e-9);
  EXPECT_NEAR(f.mem_share, h.b / 3201 / h.t(ref), 1e-9);
  EXPECT_LT(f.rms_relative_error, 1e-12);
  EXPECT_EQ(f.law, TimeLaw::additive);  // T_c + A/f + B/m fits exactly: no kink
}

// A roofline-shaped truth t = T_c + max(A/f, B/m): memory-bound at the default pair (SM term 0.90 ms, memory
// term 0.95 ms of t_ref = 1 ms), its kink at 1876 MHz on the 3201 MHz memory clock, so that the chosen pairs
// (1980/3201, 1980/2201, 1590/3201, 1200/2201) lie two on each side of it.
struct HiddenRoofline {
  double tc = 0.05e6, a = 0.90e6 * 1980, b = 0.95e6 * 3201;  // ns, ns·MHz, ns·MHz
  double t(ClockPair c) const { return tc + std::max(a / c.sm_mhz, b / c.mem_mhz); }
  double kink_sm_mhz(int mem_mhz) const { return a * mem_mhz / b; }
};

TEST(FitTimePairs, ChoosesTheRooflineForARooflineShapedTruthAndRecoversItsKink) {
  const HiddenRoofline h;
  const std::vector<PairSample> s = at_h200_pairs(h);
  const ClockPair ref{1980, 3201};
  const TimeFit f = fit_time_pairs(s, ref);
  ASSERT_EQ(f.law, TimeLaw::roofline);
  EXPECT_NEAR(f.clock_independent_ns, h.tc, 1e-6 * h.tc);
  EXPECT_NEAR(f.sm_scaled_ns_mhz, h.a, 1e-9 * h.a);
  EXPECT_NEAR(f.mem_scaled_ns_mhz, h.b, 1e-9 * h.b);
  EXPECT_NEAR(f.t_ref_ns, 1e6, 1e-3);
  EXPECT_NEAR(f.sm_share, 0.90, 1e-9);
  EXPECT_NEAR(f.mem_share, 0.95, 1e-9);
  EXPECT_NEAR(f.sm_scaled_ns_mhz * 3201 / f.mem_scaled_ns_mhz, 1980 * 0.90 / 0.95, 1e-6);  // kink 1875.8 MHz
  EXPECT_LT(f.max_relative_error, 1e-12);
  // The additive law misses it: 3 terms through 4 samples of a bent surface.
  const TimeFit add = fit_time_pairs(s, ref, /*kink_tolerance=*/1.0);  // a tolerance no miss exceeds: additive
  EXPECT_EQ(add.law, TimeLaw::additive);
  EXPECT_GT(add.max_relative_error, 0.05);
}

// The truth's time at 6 H200 calibration pairs (SM clocks down to 1200 MHz), each with 0.5 % Gaussian noise.
template <typename Truth>
std::vector<PairSample> noisy_pairs(const Truth& h) {
  NormalDraws noise(3);
  std::vector<PairSample> s;
  for (const auto& c : calibration_pairs(gpu::find_spec("h200"), 1200, 6))
    s.push_back({c, h.t(c) * (1 + 0.005 * noise.next())});
  return s;
}

TEST(FitTimePairs, NoisyRooflineStillChosenWithItsKinkWithinTolerance) {
  const HiddenRoofline h;
  const std::vector<PairSample> s = noisy_pairs(h);
  const TimeFit f = fit_time_pairs(s, {1980, 3201});
  ASSERT_EQ(f.law, TimeLaw::roofline);
  // 0.5 % noise on 6 pairs: a and b within 0.05, the kink at the 3201 MHz memory clock within 60 MHz.
  EXPECT_NEAR(f.sm_share, 0.90, 0.05);
  EXPECT_NEAR(f.mem_share, 0.95, 0.05);
  EXPECT_NEAR(f.sm_scaled_ns_mhz * 3201 / f.mem_scaled_ns_mhz, h.kink_sm_mhz(3201), 60);
  std::printf("noisy roofline: a %.4f, b %.4f, kink %.1f MHz (truth 0.90, 0.95, %.1f MHz)\n", f.sm_share, f.mem_share,
              f.sm_scaled_ns_mhz * 3201 / f.mem_scaled_ns_mhz, h.kink_sm_mhz(3201));
}

TEST(FitTimePairs, RooflineNeedsAFourthSampleAndAKinkItsSamplesShow) {
  const HiddenRoofline h;
  // 3 samples: the roofline's 3 parameters would fit any of them; the additive law is kept.
  std::vector<PairSample> s;
  for (ClockPair c : {ClockPair{1980, 3201}, ClockPair{1980, 2201}, ClockPair{1200, 2201}}) s.push_back({c, h.t(c)});
  EXPECT_EQ(fit_time_pairs(s, {1980, 3201}).law, TimeLaw::additive);
  // Every sample memory-bound (SM clocks above the kink): T_c + B/m fits them exactly, nothing to bend.
  s.clear();
  for (ClockPair c : {ClockPair{1980, 3201}, ClockPair{1980, 2201}, ClockPair{1935, 3201}, ClockPair{1500, 2201}})
    s.push_back({c, h.t(c)});
  const TimeFit f = fit_time_pairs(s, {1980, 3201});
  EXPECT_EQ(f.law, TimeLaw::additive);
  EXPECT_NEAR(f.sm_share, 0, 1e-9);
}

TEST(FitTimePairs, NoisyDurationsStillGiveAAndBWithinTolerance) {
  const Hidden h;
  const std::vector<PairSample> s = noisy_pairs(h);
  const ClockPair ref{1980, 3201};
  const TimeFit f = fit_time_pairs(s, ref);
  // 0.5 % noise on 6 pairs: a and b within 0.05 of the truth (a = 0.53, b = 0.20 at the default pair).
  EXPECT_NEAR(f.sm_share, h.a / 1980 / h.t(ref), 0.05);
  EXPECT_NEAR(f.mem_share, h.b / 3201 / h.t(ref), 0.05);
  EXPECT_LT(f.rms_relative_error, 0.01);
  EXPECT_EQ(f.law, TimeLaw::additive);  // the noise does not bend the law
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
