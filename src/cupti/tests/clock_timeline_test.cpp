#include <gtest/gtest.h>

#include "cupti/clock_timeline.hpp"

using gearshift::cupti::ClockTimeline;
using gearshift::trace::DeviceSample;

TEST(ClockTimeline, NearestSamplePerDevice) {
  ClockTimeline t(8);
  t.add(DeviceSample{0, 100, 1980, 3201, 500000});
  t.add(DeviceSample{0, 200, 1830, 3201, 690000});
  t.add(DeviceSample{1, 150, 1410, 2201, 300000});
  EXPECT_EQ(t.nearest(0, 120)->sm_clock_mhz, 1980);
  EXPECT_EQ(t.nearest(0, 160)->sm_clock_mhz, 1830);
  EXPECT_EQ(t.nearest(0, 5000)->sm_clock_mhz, 1830);
  EXPECT_EQ(t.nearest(0, 0)->sm_clock_mhz, 1980);
  EXPECT_EQ(t.nearest(1, 0)->mem_clock_mhz, 2201);
  EXPECT_FALSE(t.nearest(2, 0).has_value());
  EXPECT_FALSE(t.nearest(-1, 0).has_value());
}

TEST(ClockTimeline, RingKeepsTheNewestAndIgnoresOutOfOrder) {
  ClockTimeline t(3);
  for (int i = 0; i < 5; ++i) t.add(DeviceSample{0, i * 10, 1000 + i, 0, -1});
  t.add(DeviceSample{0, 5, 7, 0, -1});  // older than the newest: ignored
  EXPECT_EQ(t.nearest(0, 0)->sm_clock_mhz, 1002);  // samples 0 and 1 fell out
  EXPECT_EQ(t.nearest(0, 31)->sm_clock_mhz, 1003);
  EXPECT_EQ(t.nearest(0, 100)->sm_clock_mhz, 1004);
}
