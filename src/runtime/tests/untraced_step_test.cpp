#include "runtime/untraced_step.hpp"

#include <algorithm>

#include <gtest/gtest.h>

namespace gearshift::runtime {
namespace {

// Options that count from the first launch (no settle time, no minimum window) over at least `min_steps` steps.
UntracedStepOptions counting_at_once(std::size_t min_steps) {
  UntracedStepOptions o;
  o.settle_ns = 0;
  o.min_window_ns = 0;
  o.min_steps = min_steps;
  return o;
}

TEST(UntracedStep, PeriodIsLaunchesPerStepOverTheLaunchRate) {
  UntracedStepOptions o;
  o.settle_ns = 100;
  o.min_window_ns = 1000;
  o.min_steps = 2;
  UntracedStep u(/*stop_ns=*/0, /*launches_per_step=*/4, o);
  u.add_launch(50);  // before the settle time: recording may still be on
  EXPECT_EQ(u.counted(), 0u);
  // 4 launches per 200 ns step: one every 50 ns.
  for (std::int64_t t = 100; t <= 500; t += 50) u.add_launch(t);
  EXPECT_FALSE(u.done());  // 400 ns counted, 1000 needed
  for (std::int64_t t = 550; t <= 1100; t += 50) u.add_launch(t);
  EXPECT_TRUE(u.done());
  EXPECT_DOUBLE_EQ(u.period_ns(), 200);
  EXPECT_EQ(u.counted(), 21u);
}

// Each step's 10 launches in a 1 ns burst, steps 1000 ns apart: the launch rate over a window that ends in a
// burst is 10 % off (9 step spans hold 10 bursts); the span of one step's launches is not.
TEST(UntracedStep, BurstsOfLaunchesDoNotBiasIt) {
  const UntracedStepOptions o = counting_at_once(9);
  UntracedStep u(0, 10, o);
  for (int s = 0; s < 10; ++s)
    for (int k = 0; k < 10; ++k) u.add_launch(s * 1000 + k / 10);
  ASSERT_TRUE(u.done());
  EXPECT_DOUBLE_EQ(u.period_ns(), 1000);
}

// Measured on an H200 (torch.compile GPT-2): launches from two threads (PyTorch's backward runs on its autograd
// thread) reach the feed in per-thread batches; in arrival order the median span of one step's worth of
// launches was a quarter of the step (5.5 ms of 20.8 ms).
TEST(UntracedStep, LaunchesOfTwoThreadsArrivingInBatches) {
  const UntracedStepOptions o = counting_at_once(1);
  UntracedStep u(0, 8, o);
  // Steps of 1000 ns: 4 forward launches (thread A) at 0-30, 4 backward launches (thread B) at 500-530; the feed
  // delivers thread A's at once and thread B's three steps at a time.
  for (int s = 0; s < 30; ++s) {
    for (int k = 0; k < 4; ++k) u.add_launch(s * 1000 + k * 10);
    if (s % 3 == 2)
      for (int b = s - 2; b <= s; ++b)
        for (int k = 0; k < 4; ++k) u.add_launch(b * 1000 + 500 + k * 10);
  }
  EXPECT_DOUBLE_EQ(u.period_ns(), 1000);
}

// CUDA graphs: the CPU launches 10 steps of 5 launches within 500 ns, then waits in loss.item() until the GPU
// ran them (10 x 1000 ns). Spans of one step's launches are the CPU's speed; whole synchronize cycles
// are the GPU's.
TEST(UntracedStep, ACpuThatRunsAheadCountsOverWholeSynchronizeCycles) {
  const UntracedStepOptions o = counting_at_once(1);
  UntracedStep u(0, 5, o);
  for (int cycle = 0; cycle < 8; ++cycle) {
    const std::int64_t t0 = cycle * 10'000;
    for (int s = 0; s < 10; ++s)
      for (int k = 0; k < 5; ++k) u.add_launch(t0 + s * 50 + k * 10);  // 10 steps launched in 500 ns
    u.add_sync(t0 + 9'990);                                            // returns when the GPU ran them
  }
  u.add_launch(80'000);
  EXPECT_DOUBLE_EQ(u.period_ns(), 1000);
  // Without synchronizes: spans of half the window's steps average most of the run-ahead (one step's span was
  // the CPU's 50 ns before).
  UntracedStep v(0, 5, o);
  for (int cycle = 0; cycle < 8; ++cycle)
    for (int s = 0; s < 10; ++s)
      for (int k = 0; k < 5; ++k) v.add_launch(cycle * 10'000 + s * 50 + k * 10);
  EXPECT_NEAR(v.period_ns(), 1000, 150);
}

// Megatron-LM on an H200: 444 synchronizes per iteration, and an iteration launches unevenly (its optimizer's
// hundreds of small launches in a few ms). Counting from the first to the last synchronize of the window, which
// fell at different points of an iteration, measured 237.8 ms for a 265 ms iteration. Here: a 1000 ns step of
// 100 launches, 80 of them in its last 100 ns, a synchronize after every 10th launch; the window ends inside
// a step's dense part. Only whole steps between synchronizes give the step.
TEST(UntracedStep, ManySynchronizesPerUnevenStepCountWholeSteps) {
  const UntracedStepOptions o = counting_at_once(1);
  auto launch_time = [](int s, int k) -> std::int64_t {
    return s * 1000 + (k < 20 ? k * 45 : 900 + (k - 20) * 100 / 80);  // 20 launches in 900 ns, 80 in 100 ns
  };
  for (const bool anchored : {false, true}) {  // anchored: the step's last launch is its anchor kernel
    UntracedStep u(0, 100, o, anchored);
    for (int s = 0; s < 9; ++s)
      for (int k = 0; k < 100; ++k) {
        u.add_launch(launch_time(s, k), k == 99);
        if (k % 10 == 9) u.add_sync(launch_time(s, k) + 1);
      }
    for (int k = 0; k < 60; ++k) u.add_launch(9000 + (k < 20 ? k * 45 : 900 + (k - 20) * 100 / 80));
    u.add_launch(10'200);  // the window's last tenth, cut
    EXPECT_EQ(u.anchored(), anchored);
    EXPECT_DOUBLE_EQ(u.period_ns(), 1000) << anchored;
  }
}

// Megatron-LM on an H200 logs every 10th iteration, which takes longer; a window of 8 steps measured 248.7 ms
// for iterations that averaged 257-275 ms in its own log. Here with the default options: 200 ms steps of 20
// launches, a synchronize at each step's end, every 10th step 400 ms, the first slow one the window's 9th step:
// 8 steps held none. The mean step is 220 ms.
TEST(UntracedStep, AnOccasionalSlowStepCountsInTheDefaultWindow) {
  auto measure = [](UntracedStepOptions o) {
    UntracedStep u(0, 20, o);
    std::int64_t t = static_cast<std::int64_t>(o.settle_ns) + 1'000'000;
    for (int s = 0; !u.done(); ++s) {  // read as soon as done(), as run --auto does
      const std::int64_t len = s % 10 == 8 ? 400'000'000 : 200'000'000;
      for (int k = 0; k < 20 && !u.done(); ++k) u.add_launch(t + k * 1'000'000);
      u.add_sync(t + len - 1'000'000);
      t += len;
    }
    return u.period_ns();
  };
  EXPECT_NEAR(measure({}), 220e6, 0.04 * 220e6);
  UntracedStepOptions short_window;
  short_window.min_window_ns = 1e9;
  short_window.min_steps = 8;
  EXPECT_LT(measure(short_window), 0.93 * 220e6);  // what 8 steps measured: no slow step in them
}

TEST(UntracedStep, NeedsEnoughSteps) {
  UntracedStepOptions o;
  o.settle_ns = 0;
  o.min_window_ns = 10;
  o.min_steps = 8;
  UntracedStep u(0, 10, o);
  for (int i = 0; i < 50; ++i) u.add_launch(i * 100);  // 5 steps of launches
  EXPECT_FALSE(u.done());
  for (int i = 50; i < 81; ++i) u.add_launch(i * 100);
  EXPECT_TRUE(u.done());
  EXPECT_DOUBLE_EQ(u.period_ns(), 1000);
  EXPECT_THROW(UntracedStep(0, 0), std::invalid_argument);
}

TEST(UntracedStep, LaunchesPerStepCountsGraphLaunchesOnceAndCopiesNot) {
  trace::Trace t;
  trace::IterationAnalysis an;
  // Steps at 0, 100, 200; each: two kernels of their own and one graph launch of three kernels.
  std::int64_t corr = 0;
  for (int s = 0; s < 3; ++s) {
    const std::int64_t base = s * 100;
    for (int k = 0; k < 2; ++k) {
      trace::OpRecord op;
      op.start_ns = base + k * 10;
      op.correlation = corr++;
      t.ops.push_back(op);
    }
    for (int k = 0; k < 3; ++k) {
      trace::OpRecord op;
      op.start_ns = base + 30 + k * 10;
      op.correlation = corr;
      op.graph_id = 7;
      t.ops.push_back(op);
    }
    ++corr;
    trace::OpRecord copy;  // a copy (the feed's Y line) has its copy call's correlation and no L line
    copy.kind = trace::OpKind::memcpy;
    copy.start_ns = base + 25;
    copy.correlation = corr++;
    t.ops.push_back(copy);
    trace::Iteration it;
    it.start_ns = base;
    it.end_ns = base + 60;
    an.iterations.push_back(it);
  }
  std::stable_sort(t.ops.begin(), t.ops.end(),
                   [](const trace::OpRecord& a, const trace::OpRecord& b) { return a.start_ns < b.start_ns; });
  const auto n = launches_per_step(t, an);
  ASSERT_TRUE(n.has_value());
  EXPECT_DOUBLE_EQ(*n, 3);  // 2 kernels and 1 graph launch; the copy is no launch (4 before it was left out)
  an.iterations.resize(1);
  EXPECT_FALSE(launches_per_step(t, an).has_value());
}

// Megatron-LM's iterations launch 2,806 kernels, or 3,098 when they clip their gradients (H200, session 24): the
// traced steps' launches per step were not the untraced window's. Here: 1000 ns steps of 100 launches, every
// other one with a block of 30 more in its middle, a synchronize at each step's end, 100 launches per step
// counted in the traced steps. By launches the step measures 100/115 of itself; by the anchor kernel (the
// step's last launch), the step.
TEST(UntracedStep, StepsCountedByTheirAnchorKernelWhateverVariantsTheyRun) {
  const UntracedStepOptions o = counting_at_once(16);
  auto measure = [&](bool anchored) {
    UntracedStep u(0, 100, o, anchored);
    for (int s = 0; !u.done() || s < 24; ++s) {
      const int n = s % 2 ? 130 : 100;
      for (int k = 0; k < n; ++k) u.add_launch(s * 1000 + k * 900 / n, k == n - 1);
      u.add_sync(s * 1000 + 950);
    }
    return u.period_ns();
  };
  EXPECT_DOUBLE_EQ(measure(true), 1000);
  EXPECT_LT(measure(false), 900);
}

// The anchor kernel launched again outside the step's own work: every 5th step is a logging iteration that
// launches 10 more kernels (one of them the anchor's) and takes 200 ns more. Steps of 100 launches over 1000 ns,
// the anchor last, a synchronize at 950 ns: the job's mean step is 1040 ns. Counted as a step, each extra anchor
// launch measured 5/6 of it.
TEST(UntracedStep, AnAnchorLaunchedAgainInALoggingIterationStartsNoStep) {
  const UntracedStepOptions o = counting_at_once(16);
  UntracedStep u(0, 100, o, true);
  std::int64_t t0 = 0;
  for (int s = 0; s < 40; ++s) {
    for (int k = 0; k < 100; ++k) u.add_launch(t0 + k * 9, k == 99);
    u.add_sync(t0 + 950);
    std::int64_t len = 1000;
    if (s % 5 == 4) {  // the logging iteration's own launches, after the step's
      for (int k = 0; k < 10; ++k) u.add_launch(t0 + 960 + k * 20, k == 5);
      u.add_sync(t0 + 1150);
      len = 1200;
    }
    t0 += len;
  }
  ASSERT_TRUE(u.anchored());
  // Whole steps between synchronizes: m steps of which about a fifth are logging ones.
  EXPECT_NEAR(u.period_ns(), 1040, 1040 * 0.01);
}

TEST(UntracedStep, AnchoredNeedsEnoughAnchorLaunches) {
  const UntracedStepOptions o = counting_at_once(4);
  UntracedStep u(0, 10, o, true);
  EXPECT_TRUE(u.anchored());
  for (int i = 0; i < 30; ++i) u.add_launch(i * 100, i % 10 == 9);  // three steps of launches
  EXPECT_FALSE(u.done());  // 3 anchors: 2 steps between them
  EXPECT_EQ(u.period_ns(), 0);
  for (int i = 30; i < 50; ++i) u.add_launch(i * 100, i % 10 == 9);
  EXPECT_TRUE(u.done());
  EXPECT_TRUE(u.anchored());
  EXPECT_EQ(u.anchors(), 5u);
  EXPECT_DOUBLE_EQ(u.period_ns(), 1000);
}

// An anchor kernel that this window does not launch once a step (never, here) gives way to counting launches:
// not waiting for anchors that do not come.
TEST(UntracedStep, AnAnchorNotLaunchedOnceAStepGivesWayToLaunches) {
  const UntracedStepOptions o = counting_at_once(4);
  UntracedStep u(0, 10, o, true);
  for (int i = 0; i < 39; ++i) u.add_launch(i * 100, false);
  EXPECT_TRUE(u.anchored());  // fewer than 4 steps of launches: too early to judge
  EXPECT_FALSE(u.done());
  for (int i = 39; i < 81; ++i) u.add_launch(i * 100, false);
  EXPECT_FALSE(u.anchored());
  EXPECT_TRUE(u.done());
  EXPECT_DOUBLE_EQ(u.period_ns(), 1000);
  // Twice a step is as far off.
  UntracedStep v(0, 10, o, true);
  for (int i = 0; i < 81; ++i) v.add_launch(i * 100, i % 5 == 4);
  EXPECT_FALSE(v.anchored());
  EXPECT_DOUBLE_EQ(v.period_ns(), 1000);
}

// CUDA graphs' run-ahead (as in ACpuThatRunsAheadCountsOverWholeSynchronizeCycles), counted by anchors: whole
// synchronize cycles give the GPU's step; without synchronizes, spans of half the window's anchor launches.
TEST(UntracedStep, AnchoredCpuThatRunsAhead) {
  const UntracedStepOptions o = counting_at_once(1);
  UntracedStep u(0, 5, o, true), v(0, 5, o, true);
  for (int cycle = 0; cycle < 8; ++cycle) {
    const std::int64_t t0 = cycle * 10'000;
    for (int s = 0; s < 10; ++s)
      for (int k = 0; k < 5; ++k) {
        u.add_launch(t0 + s * 50 + k * 10, k == 4);
        v.add_launch(t0 + s * 50 + k * 10, k == 4);
      }
    u.add_sync(t0 + 9'990);
  }
  u.add_launch(80'000);
  v.add_launch(80'000);
  EXPECT_DOUBLE_EQ(u.period_ns(), 1000);
  EXPECT_NEAR(v.period_ns(), 1000, 150);
}

trace::OpRecord kernel(std::uint32_t name, std::int64_t start) {
  trace::OpRecord op;
  op.name_id = name;
  op.start_ns = start;
  op.duration_ns = 5;
  return op;
}

// Steps of: A, B, B, C, D (D missing in the second step), E launched in a graph, F; F is the step's last kernel
// launched once in every step, so it is the anchor. A variant's block that repeats F in one step rules F out.
TEST(StepAnchorName, TheLastKernelLaunchedOnceInEveryStep) {
  trace::Trace t;
  t.names = {"A", "B", "C", "D", "E", "F"};
  trace::IterationAnalysis an;
  for (int s = 0; s < 3; ++s) {
    const std::int64_t b = s * 100;
    t.ops.push_back(kernel(0, b));
    t.ops.push_back(kernel(1, b + 10));
    t.ops.push_back(kernel(1, b + 20));
    t.ops.push_back(kernel(2, b + 30));
    if (s != 1) t.ops.push_back(kernel(3, b + 40));
    trace::OpRecord e = kernel(4, b + 50);
    e.graph_id = 3;
    t.ops.push_back(e);
    t.ops.push_back(kernel(5, b + 60));
    trace::Iteration it;
    it.start_ns = b;
    it.end_ns = b + 100;
    an.iterations.push_back(it);
  }
  EXPECT_EQ(step_anchor_name(t, an), "F");
  t.ops.insert(t.ops.begin() + 8, kernel(5, 105));  // the second step runs F twice
  EXPECT_EQ(step_anchor_name(t, an), "C");
  an.iterations.resize(1);
  EXPECT_EQ(step_anchor_name(t, an), std::nullopt);
}

}  // namespace
}  // namespace gearshift::runtime
