#include "trace/idle_rescale.hpp"

#include <gtest/gtest.h>

namespace gearshift::trace {
namespace {

TemplateOp op(std::int32_t stream, double start, double duration, double gap) {
  TemplateOp o;
  o.stream = stream;
  o.start_offset_ns = start;
  o.duration_ns = duration;
  o.gap_before_ns = gap;
  return o;
}

// One stream: kernels of 10, 20, 10 ns with idle gaps 5, 10, and 15 at the end (period 70, busy 40, idle 30).
IterationTemplate one_stream() {
  IterationTemplate t;
  t.ops = {op(0, 0, 10, 15), op(0, 15, 20, 5), op(0, 45, 10, 10)};
  t.period_ns = 70;
  return t;
}

TEST(IdleRescale, ShrinksOnlyTheIdleTimeOfOneStream) {
  IterationTemplate t = one_stream();
  EXPECT_DOUBLE_EQ(template_busy_ns(t), 40);
  rescale_idle(t, 55);  // idle 30 -> 15: every gap halved
  EXPECT_DOUBLE_EQ(t.period_ns, 55);
  EXPECT_DOUBLE_EQ(t.ops[0].start_offset_ns, 0);
  EXPECT_DOUBLE_EQ(t.ops[1].start_offset_ns, 12.5);
  EXPECT_DOUBLE_EQ(t.ops[2].start_offset_ns, 37.5);
  EXPECT_DOUBLE_EQ(t.ops[0].gap_before_ns, 7.5);  // 15 before it, across the step boundary
  EXPECT_DOUBLE_EQ(t.ops[1].gap_before_ns, 2.5);
  EXPECT_DOUBLE_EQ(t.ops[2].gap_before_ns, 5);
  for (const auto& o : t.ops) EXPECT_GT(o.duration_ns, 0);
  EXPECT_DOUBLE_EQ(t.ops[1].duration_ns, 20);
  EXPECT_DOUBLE_EQ(template_busy_ns(t), 40);
}

// A launch-bound step: each kernel is launched just before it starts, the job synchronizes in the last gap.
TEST(IdleRescale, MovesTheLaunchesAndSynchronizesWithTheIdleTime) {
  IterationTemplate t = one_stream();
  const double launches[] = {-2, 13, 43};  // 2 ns before each start; the first one in the step before
  for (std::size_t i = 0; i < 3; ++i) {
    t.ops[i].launch_offset_ns = launches[i];
    t.ops[i].launch_known = true;
  }
  TemplateSync y;
  y.enter_offset_ns = 56;
  y.duration_ns = 10;  // idle [55, 70): returns at 66
  t.syncs.push_back(y);
  rescale_idle(t, 55);  // idle halved
  EXPECT_DOUBLE_EQ(t.ops[0].launch_offset_ns, -2);  // before the step: not mapped
  EXPECT_DOUBLE_EQ(t.ops[1].launch_offset_ns, 11.5);  // 2 ns of idle before its kernel's start, halved
  EXPECT_DOUBLE_EQ(t.ops[2].launch_offset_ns, 36.5);
  EXPECT_DOUBLE_EQ(t.syncs[0].enter_offset_ns, 40 + 0.5 * 16);  // busy 40 before it, idle 16 of it halved
  EXPECT_DOUBLE_EQ(t.syncs[0].duration_ns, 5);
}

TEST(IdleRescale, StretchesToo) {
  IterationTemplate t = one_stream();
  rescale_idle(t, 100);  // idle 30 -> 60
  EXPECT_DOUBLE_EQ(t.ops[1].start_offset_ns, 20);
  EXPECT_DOUBLE_EQ(t.ops[2].start_offset_ns, 60);
  EXPECT_DOUBLE_EQ(t.ops[2].gap_before_ns, 20);
}

// Two streams: the side stream's gap lies partly in the main stream's busy time; only its idle part shrinks.
TEST(IdleRescale, KeepsTheBusyPartOfAnotherStreamsGap) {
  IterationTemplate t;
  // main: [0,10) [30,40); side: [5,20) then [35,45) (gap 15 on its stream, of which [20,30) idle, [30,35) busy).
  t.ops = {op(0, 0, 10, 60), op(1, 5, 15, 60), op(0, 30, 10, 20), op(1, 35, 10, 15)};
  t.period_ns = 100;  // busy [0,20) + [30,45) = 35, idle 65
  rescale_idle(t, 35 + 65 * 0.2);
  EXPECT_NEAR(t.ops[2].start_offset_ns, 20 + 10 * 0.2, 1e-9);
  EXPECT_NEAR(t.ops[3].start_offset_ns, 20 + 2 + 5, 1e-9);
  EXPECT_NEAR(t.ops[3].gap_before_ns, 10 * 0.2 + 5, 1e-9);  // 10 idle scaled, 5 under the main stream kept
  EXPECT_NEAR(t.ops[2].gap_before_ns, 10 + 10 * 0.2, 1e-9);  // [10,20) under the side stream kept
}

TEST(IdleRescale, RefusesAStepShorterThanItsKernels) {
  IterationTemplate t = one_stream();
  try {
    rescale_idle(t, 39);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("shorter than the 0.00 ms its kernels and copies are busy"), std::string::npos) << e.what();
  }
  EXPECT_DOUBLE_EQ(t.period_ns, 70);  // untouched
  EXPECT_THROW(rescale_idle(t, 0), std::invalid_argument);
  IterationTemplate busy;
  busy.ops = {op(0, 0, 10, 0)};
  busy.period_ns = 10;
  EXPECT_THROW(rescale_idle(busy, 12), std::invalid_argument);
  EXPECT_NO_THROW(rescale_idle(busy, 10));
}

}  // namespace
}  // namespace gearshift::trace
