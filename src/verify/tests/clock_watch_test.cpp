#include "verify/clock_watch.hpp"

#include <gtest/gtest.h>

namespace gearshift::verify {
namespace {

std::vector<ClockSample> reads(std::size_t n, unsigned mhz, std::uint64_t reasons) {
  return std::vector<ClockSample>(n, ClockSample{mhz, reasons});
}

// A lock set by someone else while gearshift held none (a dry run's blocks): the reason bit turns on.
TEST(ClockWatch, ALockSetBySomeoneElseInAHoldFreeBlockIsSaid) {
  ClockWatch w;
  const BlockHold none{true, std::nullopt};
  EXPECT_FALSE(w.check(reads(20, 1980, 0), none));  // the reference: no lock
  EXPECT_EQ(w.reference(), std::optional<bool>(false));
  EXPECT_FALSE(w.check(reads(20, 1755, 0x4), none));  // a power cap is the GPU's own: not a change
  auto s = reads(20, 1980, 0);
  s[17] = s[18] = ClockSample{1400, kReasonApplicationsClocksSetting};
  const auto why = w.check(s, none);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("changed by someone else"), std::string::npos) << *why;
  EXPECT_NE(why->find("on in 2 of 20 reads (it was off"), std::string::npos) << *why;
}

// A GPU whose clocks were held before gearshift started (application clocks an admin set) keeps that state: no
// change; its being taken away mid-run is one.
TEST(ClockWatch, AStateHeldFromTheStartIsTheBaselineItsRemovalIsAChange) {
  ClockWatch w;
  const BlockHold none{true, std::nullopt};
  EXPECT_FALSE(w.check(reads(10, 1600, kReasonApplicationsClocksSetting), none));
  EXPECT_FALSE(w.check(reads(10, 1600, kReasonApplicationsClocksSetting), none));
  const auto why = w.check(reads(10, 1980, 0), none);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("off in 10 of 10 reads (it was on"), std::string::npos) << *why;
}

// gearshift's own locks set the bit in its plan blocks: those are judged by the SM clock against its locks.
TEST(ClockWatch, LocksResetUnderAFullyLockedBlockAreSaidIdleReadsAreNot) {
  ClockWatch w;
  EXPECT_FALSE(w.check(reads(10, 1980, 0), BlockHold{true, std::nullopt}));
  const BlockHold held{false, 1410u};
  EXPECT_FALSE(w.check(reads(10, 1410, kReasonApplicationsClocksSetting), held));
  EXPECT_FALSE(w.check(reads(10, 1440, kReasonApplicationsClocksSetting), held));  // within the slack
  EXPECT_FALSE(w.check(reads(10, 1980, kReasonGpuIdle), held));  // idle: the clock says nothing
  auto s = reads(10, 1410, kReasonApplicationsClocksSetting);
  s[9] = ClockSample{1980, 0};
  const auto why = w.check(s, held);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("1410 MHz at most, NVML read up to 1980 MHz in 1 of 10 reads"), std::string::npos) << *why;
  // Some positions locked and some not: neither sign applies.
  EXPECT_FALSE(w.check(reads(10, 1980, kReasonApplicationsClocksSetting), BlockHold{false, std::nullopt}));
  EXPECT_FALSE(w.check({}, held));
}

}  // namespace
}  // namespace gearshift::verify
