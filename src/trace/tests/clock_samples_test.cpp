// Clock samples onto ops by nearest midpoint (run --auto's warm-up: the clocks gearshift read beside the feed).
#include "trace/clock_samples.hpp"

#include <gtest/gtest.h>

namespace gearshift::trace {
namespace {

OpRecord op(std::int64_t start, std::int64_t dur, int sm = 0) {
  OpRecord r;
  r.start_ns = start;
  r.duration_ns = dur;
  r.sm_clock_mhz = sm;
  return r;
}

DeviceSample sample(std::int64_t t, int sm, int mem) {
  DeviceSample s;
  s.time_ns = t;
  s.sm_clock_mhz = sm;
  s.mem_clock_mhz = mem;
  return s;
}

TEST(AttachClockSamples, EachOpGetsTheSampleNearestItsMidpoint) {
  Trace t;
  t.ops = {op(0, 4'000'000),            // mid 2 ms: the 0 ms sample (2 ms away) beats the 10 ms one
           op(4'000'000, 4'000'000),    // mid 6 ms: the 10 ms sample (4 ms) beats 0 ms (6 ms)
           op(19'000'000, 2'000'000),   // mid 20 ms: exactly on a sample
           op(21'000'000, 1'000'000, 1755),  // already sampled (the tracer's): kept
           op(90'000'000, 1'000'000),   // 60 ms past the last sample: beyond 50 ms, left unsampled
           op(-70'000'000, 1'000'000)}; // before the first sample by more than 50 ms
  const std::vector<DeviceSample> s = {sample(0, 1980, 3201), sample(10'000'000, 1965, 3201),
                                       sample(20'000'000, 1875, 2619), sample(30'000'000, 0, 3201)};
  EXPECT_EQ(attach_clock_samples(t, s, 50'000'000), 3u);
  EXPECT_EQ(t.ops[0].sm_clock_mhz, 1980);
  EXPECT_EQ(t.ops[1].sm_clock_mhz, 1965);
  EXPECT_EQ(t.ops[2].sm_clock_mhz, 1875);
  EXPECT_EQ(t.ops[2].mem_clock_mhz, 2619);
  EXPECT_EQ(t.ops[3].sm_clock_mhz, 1755);
  EXPECT_EQ(t.ops[4].sm_clock_mhz, 0);
  EXPECT_EQ(t.ops[5].sm_clock_mhz, 0);
}

TEST(AttachClockSamples, ASampleWithoutAnSmClockSetsNothing) {
  Trace t;
  t.ops = {op(29'000'000, 2'000'000)};  // nearest: the 30 ms sample, which read no SM clock
  EXPECT_EQ(attach_clock_samples(t, {sample(0, 1980, 3201), sample(30'000'000, 0, 0)}, 50'000'000), 0u);
  EXPECT_EQ(t.ops[0].sm_clock_mhz, 0);
  EXPECT_EQ(attach_clock_samples(t, {}, 50'000'000), 0u);
}

}  // namespace
}  // namespace gearshift::trace
