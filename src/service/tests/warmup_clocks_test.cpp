// run --auto's clock sampler: NVML read on its own thread, samples on the feed's clock (CLOCK_MONOTONIC).
#include "service/warmup_clocks.hpp"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/live.hpp"

namespace gearshift::service {
namespace {

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
