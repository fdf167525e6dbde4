#include "runtime/scheduler.hpp"

#include <gtest/gtest.h>

namespace gearshift::runtime {
namespace {

// Four 10 ms kernels per 40 ms step; clocks change at position 2 (to 1200) and back at 0 (to 1980).
ClockPlan plan4() {
  ClockPlan p;
  p.gpu = "h200";
  p.period_ns = 40e6;
  p.default_clocks = {1980, 3201};
  for (int i = 0; i < 4; ++i)
    p.positions.push_back({std::string(1, static_cast<char>('a' + i)), 10e6, i * 10e6, i < 2 ? model::ClockPair{1980, 3201} : model::ClockPair{1200, 3201}});
  return p;
}

TEST(Scheduler, ChangePositionsAreCyclic) {
  auto p = plan4();
  EXPECT_EQ(p.change_positions(), (std::vector<std::size_t>{0, 2}));
}

TEST(Scheduler, IssuesEachChangeLatencyAhead) {
  auto p = plan4();
  ActuationScheduler s(p, {.switch_latency_ns = 3e6, .min_interval_ns = 1e6});
  s.on_launch(0, true);
  s.on_launch(1, true);
  s.on_complete(0, 0, 10'000'000);  // position 0 ended at 10 ms: position 2 starts at 20 ms
  auto c = s.poll(10'000'000);
  ASSERT_EQ(c.size(), 1u);  // sync: the GPU is in phase [0,2) -> 1980
  EXPECT_EQ(c[0].clocks.sm_mhz, 1980);
  ASSERT_TRUE(s.next_wakeup_ns());
  EXPECT_EQ(*s.next_wakeup_ns(), 17'000'000);  // 20 ms - L
  c = s.poll(17'000'000);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].position, 2);
  EXPECT_EQ(c[0].clocks.sm_mhz, 1200);
  EXPECT_EQ(c[0].boundary_ns, 20'000'000);
  EXPECT_EQ(*s.next_wakeup_ns(), 37'000'000);  // next step's position 0 at 40 ms
  EXPECT_EQ(s.stats().dropped, 0u);
}

// Measured on an H200 (torch.compile GPT-2, CUDA graphs): a plan of one phase (1860 MHz, no change boundary)
// went back to the default clocks whenever the CPU had launched two steps past the latest anchor, which a CPU
// running ahead of the GPU does right after every anchor: 18.8 % of the kernel time at the intended clocks. A
// plan without a change has nothing to time: its clocks stay while the predictor is locked.
TEST(Scheduler, APlanWithoutChangesKeepsItsClocksWithoutAnchors) {
  ClockPlan p;
  p.gpu = "h200";
  p.period_ns = 40e6;
  p.default_clocks = {1980, 3201};
  for (int i = 0; i < 4; ++i)
    p.positions.push_back({std::string(1, static_cast<char>('a' + i)), 10e6, i * 10e6, model::ClockPair{1965, 3201}});
  ASSERT_TRUE(p.change_positions().empty());
  ActuationScheduler s(p, {.switch_latency_ns = 3e6});
  s.on_launch(0, true);
  s.on_complete(0, 0, 10'000'000);
  auto c = s.poll(10'000'000);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].clocks.sm_mhz, 1965);
  for (std::int64_t a = 1; a <= 40; ++a) s.on_launch(a, true);  // ten steps launched, no anchor for 10 s
  EXPECT_TRUE(s.poll(20'000'000).empty());
  EXPECT_TRUE(s.poll(10'000'000'000).empty());
  EXPECT_EQ(s.requested().sm_mhz, 1965);
  s.on_launch(-1, false);  // the predictor lost the job: the default clocks
  c = s.poll(10'000'000'001);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].is_default);
}

// Staleness is the anchor's age, not the launches since: a CPU three steps ahead of a fresh anchor keeps the
// plan (a count of launches sent it to the default clocks); no anchor for two periods (no drift measured yet)
// does send it there, until the next anchor sets the clocks of the phase it finds the GPU in.
TEST(Scheduler, StaleByTheAnchorsAgeNotByLaunchesAhead) {
  auto p = plan4();
  ActuationScheduler s(p, {.switch_latency_ns = 3e6});
  for (std::int64_t a = 0; a <= 12; ++a) s.on_launch(a, true);  // three steps launched ahead
  s.on_complete(0, 0, 10'000'000);
  auto c = s.poll(10'000'000);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].is_default);
  EXPECT_EQ(c[0].clocks.sm_mhz, 1980);
  c = s.poll(17'000'000);  // position 2's change, 3 ms ahead of it
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].clocks.sm_mhz, 1200);
  // 2 x 40 ms after the anchor's 10 ms: stale; the scheduler asks to be polled then.
  EXPECT_LE(*s.next_wakeup_ns(), 90'000'001);
  c = s.poll(90'000'001);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].is_default);
  s.on_complete(11, 90'000'000, 100'000'000);  // a fresh anchor: position 12 (phase [0,2)) runs next
  c = s.poll(100'000'000);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].is_default);
  EXPECT_EQ(c[0].clocks.sm_mhz, 1980);
}

// The age at which an anchor goes stale follows the drift measured between anchors: an estimate that was 0.1 ms
// off after 40 ms (0.25 %) stays valid for 1 ms / 0.25 % = 400 ms.
TEST(Scheduler, AMeasuredSmallDriftKeepsAnAnchorLonger) {
  auto p = plan4();
  ActuationScheduler s(p, {.switch_latency_ns = 3e6});
  for (std::int64_t a = 0; a <= 40; ++a) s.on_launch(a, true);
  s.on_complete(0, 0, 10'000'000);
  s.poll(10'000'000);
  s.on_complete(4, 40'000'000, 50'100'000);  // estimated to end at 50 ms: 0.1 ms off over 40.1 ms
  s.poll(50'100'000);
  for (std::int64_t t = 60'000'000; t <= 440'000'000; t += 10'000'000)
    for (const auto& ch : s.poll(t)) EXPECT_FALSE(ch.is_default) << t;
  bool went_default = false;
  for (const auto& ch : s.poll(460'000'000)) went_default |= ch.is_default;
  EXPECT_TRUE(went_default);
}

TEST(Scheduler, DropsLateLoweringAndIssuesLateRaise) {
  auto p = plan4();
  ActuationScheduler s(p, {.switch_latency_ns = 3e6});
  s.on_launch(1, true);
  s.on_complete(0, 0, 10'000'000);
  s.poll(10'000'000);
  // The GPU turns out to be faster: position 1 already ended at 13 ms, so position 2 starts at 13 ms.
  s.on_complete(1, 10'000'000, 13'000'000);
  auto c = s.poll(13'000'000);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(s.stats().dropped, 1u);  // lowering to 1200 cannot land before 13 ms
}

TEST(Scheduler, IssuesLateRaise) {
  auto p = plan4();
  ActuationScheduler s(p, {.switch_latency_ns = 3e6});
  s.on_launch(3, true);
  s.on_complete(2, 20'000'000, 30'000'000);
  auto c = s.poll(30'000'000);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].clocks.sm_mhz, 1200);  // in the low phase
  s.on_complete(3, 30'000'000, 32'000'000);  // faster than the template: next step starts at 32 ms
  c = s.poll(36'000'000);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].late);
  EXPECT_EQ(c[0].clocks.sm_mhz, 1980);
  EXPECT_EQ(s.stats().late, 1u);
  EXPECT_EQ(s.stats().dropped, 0u);
}

TEST(Scheduler, MergesChangesCloserThanMinInterval) {
  auto p = plan4();
  p.positions[3].clocks = {1980, 3201};  // phase [2,3) lasts 10 ms only
  ActuationScheduler s(p, {.switch_latency_ns = 1e6, .min_interval_ns = 15e6});
  s.on_launch(1, true);
  s.on_complete(0, 0, 10'000'000);
  s.poll(10'000'000);
  auto c = s.poll(*s.next_wakeup_ns());
  // The 1200 phase is merged with the 1980 one after it: nothing to change.
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(s.stats().merged, 1u);
  EXPECT_EQ(s.requested().sm_mhz, 1980);
}

TEST(Scheduler, SearchingRequestsDefaults) {
  auto p = plan4();
  ActuationScheduler s(p, {.switch_latency_ns = 0});
  s.on_launch(2, true);
  s.on_complete(2, 20'000'000, 30'000'000);
  auto c = s.poll(30'000'000);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].clocks.sm_mhz, 1200);
  s.on_launch(-1, false);
  c = s.poll(31'000'000);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].is_default);
  EXPECT_EQ(c[0].clocks, p.default_clocks);
  EXPECT_TRUE(s.poll(32'000'000).empty());  // only once
}

}  // namespace

// A synchronize that waited for the GPU anchors the last kernel launched before it at its return.
TEST(Scheduler, SyncThatWaitedAnchorsAtItsReturn) {
  auto p = plan4();
  ActuationScheduler s(p, {.switch_latency_ns = 3e6});
  s.on_launch(0, true);
  s.on_launch(1, true);
  s.on_sync(1, 5'000'000, 21'000'000);  // waited 16 ms: position 1 ended at 21 ms
  ASSERT_TRUE(s.estimate_start_ns(2));
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(2), 21e6);
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(4), 41e6);  // next step's position 0
}

// One that returned at once found the GPU idle: the kernel ended by its entry, at the estimate when that is
// earlier; the estimate is never pushed later than the entry.
TEST(Scheduler, SyncThatDidNotWaitBoundsTheEnd) {
  auto p = plan4();
  ActuationScheduler s(p, {.switch_latency_ns = 3e6});
  s.on_launch(1, true);
  s.on_sync(1, 30'000'000, 30'005'000);  // no anchor yet: position 1 ended by 30 ms
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(2), 30e6);
  s.on_complete(0, 0, 10'000'000);  // older sign: ignored (position 0 <= 1, ends earlier)
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(2), 30e6);

  ActuationScheduler t(p, {.switch_latency_ns = 3e6});
  t.on_launch(1, true);
  t.on_complete(0, 0, 10'000'000);           // estimate: position 1 ends at 20 ms
  t.on_sync(1, 30'000'000, 30'005'000);      // idle since <= 30 ms: the 20 ms estimate stands
  EXPECT_DOUBLE_EQ(*t.estimate_start_ns(2), 20e6);
  t.on_sync(0, 31'000'000, 31'001'000);      // a position before the anchor says nothing new
  EXPECT_DOUBLE_EQ(*t.estimate_start_ns(2), 20e6);
}

// After a synchronize the GPU is idle: the next launch starts as it is launched, whatever gap the job left
// between its steps (the template's gap is not assumed). Only the first launch after it, and only when nothing
// was launched in between.
TEST(Scheduler, FirstLaunchAfterASynchronizeAnchors) {
  auto p = plan4();
  ActuationScheduler s(p, {.switch_latency_ns = 3e6});
  for (int i = 0; i < 4; ++i) s.on_launch(i, true, i * 1000);
  s.on_sync(3, 1'000'000, 40'000'000);  // waited: position 3 ended at 40 ms; next step's 0 estimated at 40 ms
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(4), 40e6);
  s.on_launch(4, true, 52'000'000);  // the job spent 12 ms between steps
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(4), 52e6 + kLaunchToStartNs);
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(6), 72e6 + kLaunchToStartNs);
  s.on_launch(5, true, 55'000'000);  // not the first after the synchronize (and no stall): no anchor
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(6), 72e6 + kLaunchToStartNs);

  ActuationScheduler t(p, {.switch_latency_ns = 3e6});
  for (int i = 0; i < 5; ++i) t.on_launch(i, true, i * 1000);  // position 4 launched before the synchronize
  t.on_sync(3, 1'000'000, 40'000'000);
  t.on_launch(5, true, 52'000'000);
  EXPECT_DOUBLE_EQ(*t.estimate_start_ns(5), 50e6);  // the synchronize's anchor only
}

// A CPU that stops launching (a garbage collection): the GPU runs out of launched work and waits. Measured live on
// an H200 checkpointing job with 200-ms pauses: changes were issued up to 240 ms before their kernels started,
// and 56.5 % of the sampled kernel time ran at the plan's clocks. Changes past the launched kernels wait for the
// launches; the first launch after the stall finds the GPU idle and anchors.
TEST(Scheduler, ACpuStallHoldsChangesPastTheLaunchedKernels) {
  auto p = plan4();
  ActuationScheduler s(p, {.switch_latency_ns = 3e6});
  s.on_launch(0, true, 0);
  s.on_launch(1, true, 1000);
  s.on_complete(0, 0, 10'000'000);
  ASSERT_EQ(s.poll(10'000'000).size(), 1u);  // the phase the GPU is in
  auto c = s.poll(17'000'000);               // position 2 at 20 ms, the GPU still busy with position 1
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].position, 2);
  // By the estimate the GPU finished position 1 at 20 ms; nothing launched since 1 us. Without the hold, the
  // next step's position 4 (estimated at 40 ms) was issued now.
  EXPECT_TRUE(s.poll(37'000'000).empty());
  s.on_launch(2, true, 200'000'000);  // the CPU resumes: position 2 starts as it is launched
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(2), 200e6 + kLaunchToStartNs);
  s.on_launch(3, true, 201'000'000);
  EXPECT_TRUE(s.poll(201'000'000).empty());
  ASSERT_TRUE(s.next_wakeup_ns());
  EXPECT_EQ(*s.next_wakeup_ns(), 217'005'000);  // position 4 at 220 ms + launch-to-start, less L
  c = s.poll(217'005'000);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].position, 4);
  EXPECT_EQ(c[0].clocks.sm_mhz, 1980);
  EXPECT_FALSE(c[0].late);
}

// A pause the traced step had (a job that waits for its input before launching the rest) is the job's rhythm, not
// a stall: the template's offsets hold it. Without this, the shipped input-bound trace's 6 ms phase plan replayed
// 88.1 % in time instead of 95.1 %.
TEST(Scheduler, APauseTheTracedStepHadIsNotAStall) {
  auto p = plan4();
  const double launched[4] = {0, 1000, 200e6, 200e6 + 1000};  // the traced step launched position 2 200 ms later
  for (int i = 0; i < 4; ++i) p.positions[static_cast<std::size_t>(i)].launch_offset_ns = launched[i];
  ActuationScheduler s(p, {.switch_latency_ns = 3e6});
  s.on_launch(0, true, 0);
  s.on_launch(1, true, 1000);
  s.on_complete(0, 0, 10'000'000);
  ASSERT_EQ(s.poll(10'000'000).size(), 1u);
  ASSERT_EQ(s.poll(17'000'000).size(), 1u);
  auto c = s.poll(37'000'000);  // as the template says: position 4 at 40 ms
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].position, 4);
}

// A collective's completion does not anchor (its own stream; it ends when the other ranks let it).
TEST(Scheduler, CollectiveCompletionDoesNotAnchor) {
  auto p = plan4();
  p.positions[1].name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  ActuationScheduler s(p, {.switch_latency_ns = 3e6});
  s.on_launch(1, true);
  s.on_complete(0, 0, 10'000'000);
  s.on_complete(1, 10'000'000, 35'000'000);  // waited for the other rank: says nothing of the compute stream
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(2), 20e6);
}

// With anchor_on_completions off (kernel activity sampled only to measure), completions do not anchor.
TEST(Scheduler, CompletionsCanBeLeftOutOfTheAnchor) {
  auto p = plan4();
  ActuationScheduler s(p, {.switch_latency_ns = 3e6, .anchor_on_completions = false});
  s.on_launch(1, true);
  s.on_complete(0, 0, 10'000'000);
  EXPECT_FALSE(s.estimate_start_ns(2));
  EXPECT_TRUE(s.poll(10'000'000).empty());  // no anchor: the default clocks hold (already requested)
  s.on_sync(1, 5'000'000, 20'000'000);
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(2), 20e6);
}

// A stream marker anchors at the midpoint of the polls around its write, also when completions do not anchor;
// a collective's marker does not.
TEST(Scheduler, MarkerAnchorsBetweenItsPolls) {
  auto p = plan4();
  p.positions[3].name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  ActuationScheduler s(p, {.switch_latency_ns = 3e6, .anchor_on_completions = false});
  s.on_launch(3, true);
  s.on_marker(0, 10'000'000, 11'000'000);  // position 0 ended in (10, 11] ms
  ASSERT_TRUE(s.estimate_start_ns(2));
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(2), 20.5e6);
  s.on_marker(1, 22'000'000, 22'400'000);
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(2), 22.2e6);
  s.on_marker(3, 60'000'000, 60'000'000);  // the collective ended when the other rank let it
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(2), 22.2e6);
  s.on_marker(-1, 70'000'000, 70'000'000);  // not placed
  EXPECT_DOUBLE_EQ(*s.estimate_start_ns(2), 22.2e6);
}

}  // namespace gearshift::runtime
