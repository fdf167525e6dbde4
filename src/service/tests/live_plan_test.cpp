// The switching a live run and a replay follow: L and the minimum interval in ns, the plan's L where not given.
#include <gtest/gtest.h>

#include "runtime/clock_plan.hpp"
#include "service/error.hpp"
#include "service/live_plan.hpp"

namespace gearshift::service {
namespace {

TEST(Switching, NotGivenIsThePlansLatencyAndTheIntervalIsL) {
  runtime::ClockPlan plan;
  plan.switch_latency_ns = 6e6;
  Switching s;
  const runtime::SchedulerOptions so = scheduler_options(plan, s);
  EXPECT_DOUBLE_EQ(so.switch_latency_ns, 6e6);
  EXPECT_DOUBLE_EQ(so.min_interval_ns, 6e6);
  ASSERT_TRUE(s.latency_ns);
  EXPECT_DOUBLE_EQ(*s.latency_ns, 6e6);  // the L used, for the summary line (printed in ms)
}

TEST(Switching, GivenValuesAreNsAsTheCliConvertedThem) {
  runtime::ClockPlan plan;
  plan.switch_latency_ns = 6e6;
  Switching s{0.1 * 1e6, 2.5 * 1e6};  // --switch-latency-ms 0.1 --min-interval-ms 2.5
  const runtime::SchedulerOptions so = scheduler_options(plan, s);
  EXPECT_DOUBLE_EQ(so.switch_latency_ns, 100'000);
  EXPECT_DOUBLE_EQ(so.min_interval_ns, 2'500'000);
  Switching bad{-1.0, std::nullopt};
  EXPECT_THROW(scheduler_options(plan, bad), ServiceError);
  Switching bad_interval{std::nullopt, -1.0};
  EXPECT_THROW(scheduler_options(plan, bad_interval), ServiceError);
}

}  // namespace
}  // namespace gearshift::service
