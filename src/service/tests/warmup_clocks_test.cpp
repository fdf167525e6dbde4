// run --auto's clock sampler: NVML read on its own thread, samples on the feed's clock (CLOCK_MONOTONIC).
#include "service/warmup_clocks.hpp"

#include <array>
#include <atomic>
#include <initializer_list>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/live.hpp"

namespace gearshift::service {
namespace {

trace::OpRecord op(std::int64_t start, std::int64_t dur, int sm = 0) {
  trace::OpRecord r;
  r.start_ns = start;
  r.duration_ns = dur;
  r.sm_clock_mhz = sm;
  return r;
}

// Device 0's samples (time ns, SM MHz, memory MHz), in time order.
void add(cupti::ClockTimeline& c, std::initializer_list<std::array<std::int64_t, 3>> samples) {
  for (const auto& [t, sm, mem] : samples)
    c.add(trace::DeviceSample{0, t, static_cast<std::int32_t>(sm), static_cast<std::int32_t>(mem), -1});
}

TEST(AttachClocks, EachOpGetsTheSampleNearestItsMidpoint) {
  trace::Trace t;
  t.ops = {op(0, 4'000'000),            // mid 2 ms: the 0 ms sample (2 ms away) beats the 10 ms one
           op(4'000'000, 4'000'000),    // mid 6 ms: the 10 ms sample (4 ms) beats 0 ms (6 ms)
           op(19'000'000, 2'000'000),   // mid 20 ms: exactly on a sample
           op(21'000'000, 1'000'000, 1755),  // already sampled (the tracer's): kept
           op(90'000'000, 1'000'000),   // 60 ms past the last sample: beyond 50 ms, left unsampled
           op(-70'000'000, 1'000'000)}; // before the first sample by more than 50 ms
  cupti::ClockTimeline c;
  add(c, {{0, 1980, 3201}, {10'000'000, 1965, 3201}, {20'000'000, 1875, 2619}, {30'000'000, 0, 3201}});
  EXPECT_EQ(attach_clocks(t, c, 50'000'000), 3u);
  EXPECT_EQ(t.ops[0].sm_clock_mhz, 1980);
  EXPECT_EQ(t.ops[1].sm_clock_mhz, 1965);
  EXPECT_EQ(t.ops[2].sm_clock_mhz, 1875);
  EXPECT_EQ(t.ops[2].mem_clock_mhz, 2619);
  EXPECT_EQ(t.ops[3].sm_clock_mhz, 1755);
  EXPECT_EQ(t.ops[4].sm_clock_mhz, 0);
  EXPECT_EQ(t.ops[5].sm_clock_mhz, 0);
}

TEST(AttachClocks, ASampleWithoutAnSmClockSetsNothing) {
  trace::Trace t;
  t.ops = {op(29'000'000, 2'000'000)};  // nearest: the 30 ms sample, which read no SM clock
  cupti::ClockTimeline c;
  add(c, {{0, 1980, 3201}, {30'000'000, 0, 0}});
  EXPECT_EQ(attach_clocks(t, c, 50'000'000), 0u);
  EXPECT_EQ(t.ops[0].sm_clock_mhz, 0);
  const cupti::ClockTimeline none;
  EXPECT_EQ(attach_clocks(t, none, 50'000'000), 0u);
}

void wait_for_samples(const WarmupClocks& c, std::size_t n) {
  for (int i = 0; i < 2000 && c.samples() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(WarmupClocks, KernelsGetTheClocksReadWhileTheyRan) {
  std::atomic<int> reads{0};
  const std::int64_t before = runtime::monotonic_ns();
  WarmupClocks c([&]() -> std::optional<ClockReading> {
    ++reads;
    return ClockReading{1965, 3201};
  }, 2'000'000);
  wait_for_samples(c, 3);
  const std::int64_t after = runtime::monotonic_ns();
  c.stop();
  c.stop();  // idempotent
  const std::size_t taken = c.samples();
  ASSERT_GE(taken, 3u);
  EXPECT_EQ(reads.load(), static_cast<int>(taken));
  trace::Trace t;
  trace::OpRecord k;
  k.start_ns = before + (after - before) / 2;
  k.duration_ns = 1000;
  t.ops.push_back(k);
  k.start_ns = after + 10 * WarmupClocks::kMaxDistanceNs;  // long after the last sample: none
  t.ops.push_back(k);
  EXPECT_EQ(c.attach(t), 1u);
  EXPECT_EQ(t.ops[0].sm_clock_mhz, 1965);
  EXPECT_EQ(t.ops[0].mem_clock_mhz, 3201);
  EXPECT_EQ(t.ops[1].sm_clock_mhz, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(c.samples(), taken);  // stopped: no more reads
}

TEST(WarmupClocks, FailedReadsAndNoReaderGiveNoSamples) {
  std::atomic<int> failed{0}, thrown{0};
  WarmupClocks failing([&]() -> std::optional<ClockReading> {
    ++failed;
    return std::nullopt;
  }, 1'000'000);
  WarmupClocks throwing([&]() -> std::optional<ClockReading> {
    ++thrown;
    throw std::runtime_error("NVML gone");
  }, 1'000'000);
  WarmupClocks none(ReadClocks{});
  for (int i = 0; i < 2000 && (failed < 3 || thrown < 3); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE(failed.load(), 3);  // read again and again, and kept nothing
  EXPECT_GE(thrown.load(), 3);  // a reader that throws does not end the sampler
  EXPECT_EQ(failing.samples(), 0u);
  EXPECT_EQ(throwing.samples(), 0u);
  EXPECT_EQ(none.samples(), 0u);
  trace::Trace t;
  t.ops.emplace_back();
  EXPECT_EQ(failing.attach(t), 0u);
}

}  // namespace
}  // namespace gearshift::service
