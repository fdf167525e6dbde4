// The dependency-driven replay on hand-built step graphs (graph/step_graph.hpp): what waits for whom.
#include "graph/step_graph.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "model/workload.hpp"
#include "plan/clock_table.hpp"
#include "sim/collectives.hpp"
#include "sim/evaluate.hpp"
#include "sim/simulator.hpp"
#include "trace/tests/step_builder.hpp"

namespace gearshift::sim {
namespace {

constexpr model::ClockPair kDefault{1980, 3201}, kSlow{990, 3201};

struct ReplayFixture : ::testing::Test {
  model::DvfsModel m{gpu::find_spec("h200")};
  // An op as traced at default clocks: GPU start, duration and the CPU time of its launch (ns, step-relative).
  model::WorkloadOp op(model::KernelClass cls, double start, double dur, double launch, std::int32_t stream = 7) {
    model::WorkloadOp o;
    o.cls = cls;
    o.coeffs = model::class_prior(cls);
    o.ref_time_ns = dur;
    o.ref = m.default_reference(o.coeffs);
    o.start_offset_ns = start;
    o.stream = stream;
    o.launch_offset_ns = launch;
    o.launch_known = true;
    return o;
  }
  static plan::Schedule with(std::size_t n, std::size_t slow_at) {
    plan::Schedule s{plan::Strategy::baseline, 0, std::vector<model::ClockPair>(n, kDefault), 0};
    if (slow_at < n) s.clocks[slow_at] = kSlow;
    return s;
  }
};

// Elementwise prior: 1 ms at 1980 MHz takes 1.15 ms at 990 MHz (simulator_test.cpp).
constexpr double kSlowFactor = 1.15;

// A: 1 ms; the CPU then prepares the next batch and launches B at 3 ms (the GPU idles 2 ms); step 4 ms.
model::Workload cpu_bound_gap(ReplayFixture& f) {
  model::Workload w;
  w.ops = {f.op(model::KernelClass::elementwise, 0, 1e6, -5e3), f.op(model::KernelClass::elementwise, 3e6, 1e6, 2.995e6)};
  w.period_ns = 4e6;
  w.ops[1].gap_before_ns = 2e6;  // what the fallback rule sees
  return w;
}

TEST_F(ReplayFixture, TracedTimesAreReplayedExactly) {
  model::Workload w = cpu_bound_gap(*this);
  graph::StepGraph g = graph::build_step_graph(w);
  ASSERT_TRUE(g.dependency) << g.note;
  SimResult r = simulate(w, m, default_schedule(w, m), 0, true);
  EXPECT_TRUE(r.dependency_replay);
  EXPECT_NEAR(r.step_time_ns, 4e6, 1e-3);
  EXPECT_NEAR(r.timeline[1].start_ns, 3e6, 1e-6);
  // A may run 2 ms longer before B (launch-bound) moves; B until the next step's A (launched at 3.995 ms).
  ASSERT_EQ(r.slack_ns.size(), 2u);
  EXPECT_NEAR(r.slack_ns[0], 2e6, 1e-6);
  EXPECT_NEAR(r.slack_ns[1], 0, 1e-6);
}

TEST_F(ReplayFixture, AKernelBeforeACpuBoundGapIsSlowedAtNoStepTimeCost) {
  model::Workload w = cpu_bound_gap(*this);
  SimResult base = simulate(w, m, default_schedule(w, m), 0, true);
  SimResult slow = simulate(w, m, with(2, 0), 0, true);
  EXPECT_NEAR(slow.timeline[0].end_ns, kSlowFactor * 1e6, 1e-3);
  EXPECT_EQ(slow.step_time_ns, base.step_time_ns);  // B still waits for its launch
  EXPECT_NEAR(slow.timeline[1].start_ns, 3e6, 1e-6);
  EXPECT_LT(slow.energy_j, base.energy_j);                 // lower clocks, and the idle window at 990 MHz
  // The fallback rule (no launch events) pushed B by A's slow-down: the error this replay removes.
  model::Workload old = w;
  for (auto& o : old.ops) o.launch_known = false;
  old.tail_ns = 0;
  SimResult fb = simulate(old, m, with(2, 0), 0);
  EXPECT_FALSE(fb.dependency_replay);
  EXPECT_NEAR(fb.step_time_ns, (kSlowFactor + 2 + 1) * 1e6, 1);
}

TEST_F(ReplayFixture, PlannersSpendTheSlackFirst) {
  model::Workload w = cpu_bound_gap(*this);
  // The clock table lets A use its float for free; B has none.
  plan::ClockTable t = plan::build_clock_table(w, m);
  ASSERT_EQ(t.slack_ns.size(), 2u);
  const std::size_t slow = static_cast<std::size_t>(std::find(t.clocks.begin(), t.clocks.end(), kSlow) - t.clocks.begin());
  EXPECT_DOUBLE_EQ(t.budget(0, slow), t.time(0, t.default_index));
  EXPECT_GT(t.budget(1, slow), t.time(1, t.default_index));
  // At a zero slowdown budget the kernel-global plan slows A (below default clocks) and never B.
  EvaluateOptions o;
  o.max_slowdown = 0;
  o.frontier_slowdowns = {};
  o.switch_latencies_ns = {0};
  Evaluation ev = evaluate(w, m, o);
  const StrategyResult* g = nullptr;
  for (const auto& s : ev.strategies)
    if (s.schedule.strategy == plan::Strategy::kernel_global) g = &s;
  ASSERT_NE(g, nullptr);
  // A fits its 2 ms float even at the lowest SM clock, and the idle window after it then idles at 78 W, not
  // 122 W (h200.json): the window runs at the GPU's lowest clocks.
  EXPECT_EQ(g->schedule.clocks[0].sm_mhz, m.spec().min_sm_clock_mhz());
  const std::size_t b = static_cast<std::size_t>(std::find(t.clocks.begin(), t.clocks.end(), g->schedule.clocks[1]) - t.clocks.begin());
  EXPECT_LE(t.time(1, b), t.time(1, t.default_index));
  EXPECT_GT(g->saving_pct, 0);
  EXPECT_LE(g->sim.step_time_ns, ev.baseline.step_time_ns);
}

TEST_F(ReplayFixture, AChainBeforeAWaitSharesItsFloat) {
  // A then B back to back (B launched early, so it starts as A ends), then C launched at 5 ms: A has no free
  // float of its own (B waits for it), B has 3 ms; they share them by default time, 1.5 ms each.
  model::Workload w;
  w.ops = {op(model::KernelClass::elementwise, 0, 1e6, -5e3), op(model::KernelClass::elementwise, 1e6, 1e6, 0),
           op(model::KernelClass::elementwise, 5e6, 1e6, 4.995e6)};
  w.period_ns = 6e6;
  plan::ClockTable t = plan::build_clock_table(w, m);
  EXPECT_NEAR(t.slack_ns[0], 0, 1e-6);
  EXPECT_NEAR(t.slack_ns[1], 3e6, 1e-6);
  const std::size_t slow = static_cast<std::size_t>(std::find(t.clocks.begin(), t.clocks.end(), kSlow) - t.clocks.begin());
  EXPECT_DOUBLE_EQ(t.budget(0, slow), t.time(0, t.default_index));  // within its 1.5 ms share
  EXPECT_DOUBLE_EQ(t.budget(1, slow), t.time(1, t.default_index));
  // Both slowed at once: C still waits for its launch.
  plan::Schedule s{plan::Strategy::baseline, 0, {kSlow, kSlow, kDefault}, 0};
  SimResult r = simulate(w, m, s, 0, true);
  EXPECT_NEAR(r.step_time_ns, 6e6, 1e-3);
  EXPECT_NEAR(r.timeline[2].start_ns, 5e6, 1e-6);
}

// A; the CPU synchronizes (waits for A, returns 5 µs after it ends), then launches B 45 µs later.
model::Workload sync_then_launch(ReplayFixture& f) {
  model::Workload w;
  w.ops = {f.op(model::KernelClass::elementwise, 0, 1e6, -5e3), f.op(model::KernelClass::elementwise, 1.055e6, 1e6, 1.05e6)};
  w.period_ns = 2.1e6;
  trace::TemplateSync y;
  y.scope = trace::SyncRecord::Scope::device;
  y.enter_offset_ns = 1e5;
  y.duration_ns = 0.905e6;
  y.samples = 3;
  w.syncs = {y};
  w.syncs_known = true;
  return w;
}

TEST_F(ReplayFixture, ASynchronizePropagatesGpuDelayToLaterLaunches) {
  model::Workload w = sync_then_launch(*this);
  graph::StepGraph g = graph::build_step_graph(w);
  ASSERT_TRUE(g.dependency);
  ASSERT_EQ(g.syncs.size(), 1u);
  ASSERT_EQ(g.syncs[0].awaited.size(), 1u);
  EXPECT_EQ(g.syncs[0].awaited[0].position, 0u);
  EXPECT_NEAR(g.syncs[0].return_ns, 5e3, 1e-6);
  SimResult base = simulate(w, m, default_schedule(w, m), 0, true);
  EXPECT_NEAR(base.step_time_ns, 2.1e6, 1e-3);
  EXPECT_NEAR(base.timeline[1].start_ns, 1.055e6, 1e-6);
  EXPECT_NEAR(base.slack_ns[0], 0, 1e-6);  // the synchronize waits for A: no float
  // A 0.15 ms slower: the synchronize returns 0.15 ms later, B's launch and the next step's follow.
  SimResult slow = simulate(w, m, with(2, 0), 0, true);
  const double delay = (kSlowFactor - 1) * 1e6;
  EXPECT_NEAR(slow.timeline[1].start_ns, 1.055e6 + delay, 1e-3);
  EXPECT_NEAR(slow.step_time_ns, (2.1e6 + delay), 1e-3);
  // Without the synchronize B was launched ahead and only its stream order delays it (by less).
  model::Workload free_cpu = w;
  free_cpu.syncs.clear();
  SimResult nosync = simulate(free_cpu, m, with(2, 0), 0, true);
  EXPECT_LT(nosync.timeline[1].start_ns, slow.timeline[1].start_ns);
}

// Steps of unequal length whose CPU waits for the GPU at each layer's routing (trace/tests/step_builder.hpp):
// with the synchronizes placed, slower kernels lengthen the step as they would the job's. Before, such steps
// placed none, and the modelled step at half the SM clock stayed within 1 % of the default one: a plan could
// spend GPU time the CPU in fact waited for.
TEST_F(ReplayFixture, UnequalStepsWaitForTheGpuWhereTheJobSynchronized) {
  trace::test_support::RoutedCpuBuilder b;
  for (int s = 0; s < 12; ++s) b.step();
  const trace::IterationAnalysis a = trace::detect_iterations(b.t);
  ASSERT_EQ(a.method, "optimizer updates");
  const model::Workload w = model::build_workload(b.t, a, m);
  ASSERT_TRUE(w.syncs_known) << w.cpu_note;
  auto at = [&](const model::Workload& x, model::ClockPair c) {
    plan::Schedule s{plan::Strategy::baseline, 0, std::vector<model::ClockPair>(x.ops.size(), c), 0};
    return simulate(x, m, s, 0).step_time_ns;
  };
  const double base = at(w, kDefault), slow = at(w, kSlow);
  EXPECT_NEAR(base, w.period_ns, 0.02 * w.period_ns);
  // The CPU waits for the GPU 6 times a step: the kernels' stretch before each wait shows in the step.
  EXPECT_GT(slow - base, 0.2 * base) << base << " " << slow;  // 7.50 -> 10.33 ms
  // The same template with its synchronizes left out (as before): the stretch vanished into waits it did not model.
  model::Workload never = w;
  never.syncs.clear();
  never.syncs_known = false;
  EXPECT_LT(at(never, kSlow) - at(never, kDefault), 0.25 * (slow - base));  // 7.44 -> 7.44 ms
}

TEST_F(ReplayFixture, ACollectiveEndsWithTheSlowestRank) {
  // Rank 0: 1 ms of compute, then the all-reduce, which it waits in for 0.5 ms; rank 1: 1.5 ms of compute, then
  // the all-reduce (0.5 ms of transfer). Both end the step at 2 ms, the next one starts at 2.1 ms.
  model::Workload r0, r1;
  r0.ops = {op(model::KernelClass::elementwise, 0, 1e6, -5e3), op(model::KernelClass::communication, 1e6, 1e6, 0.2e6)};
  r1.ops = {op(model::KernelClass::elementwise, 0, 1.5e6, -5e3), op(model::KernelClass::communication, 1.5e6, 0.5e6, 0.2e6)};
  r0.period_ns = r1.period_ns = 2.1e6;
  RanksResult base = simulate_ranks({{&r0, &m, with(2, 9)}, {&r1, &m, with(2, 9)}}, 0);
  EXPECT_NEAR(base.ranks[0].timeline[1].end_ns, 2e6, 1e-3);
  EXPECT_NEAR(base.ranks[1].timeline[1].end_ns, 2e6, 1e-3);
  EXPECT_NEAR(base.job_step_time_ns, 2.1e6, 1e-3);
  // Rank 1's compute 0.225 ms slower: its all-reduce can end at 2.225 ms, and rank 0's ends with it.
  RanksResult slow = simulate_ranks({{&r0, &m, with(2, 9)}, {&r1, &m, with(2, 0)}}, 0);
  const double end1 = kSlowFactor * 1.5e6 + 0.5e6;
  EXPECT_NEAR(slow.ranks[1].timeline[1].end_ns, end1, 1e-3);
  EXPECT_NEAR(slow.ranks[0].timeline[1].end_ns, end1, 1e-3);
  EXPECT_NEAR(slow.ranks[0].step_time_ns, slow.ranks[1].step_time_ns, 1e-3);
  // One rank alone: its collective as traced (its wait included).
  SimResult alone = simulate(r0, m, with(2, 9), 0, true);
  EXPECT_NEAR(alone.timeline[1].end_ns, 2e6, 1e-3);
  // Ranks that do not issue the same collectives are refused.
  model::Workload r2 = r1;
  r2.ops[1].cls = model::KernelClass::elementwise;
  EXPECT_THROW(simulate_ranks({{&r0, &m, with(2, 9)}, {&r2, &m, with(2, 9)}}, 0), std::invalid_argument);
}

TEST_F(ReplayFixture, AnOpWaitingForAnotherStreamFollowsIt) {
  // B (stream 9) was launched early but started 3 µs after A (stream 7) ended: an event wait.
  model::Workload w;
  w.ops = {op(model::KernelClass::elementwise, 0, 1e6, -5e3, 7), op(model::KernelClass::elementwise, 1.003e6, 0.5e6, 0, 9)};
  w.period_ns = 2e6;
  graph::StepGraph g = graph::build_step_graph(w);
  ASSERT_TRUE(g.dependency);
  EXPECT_EQ(g.wait_on[1], 0);
  SimResult slow = simulate(w, m, with(2, 0), 0, true);
  EXPECT_NEAR(slow.timeline[1].start_ns, kSlowFactor * 1e6 + 3e3, 1e-3);
}

// The CPU side GPU-bound (graph::shrink_cpu_time, scale 0; issue 46): the 3 ms the CPU spent before launching B
// become its least cost per call (3 µs), so B follows A on the GPU, the step is the GPU's 2 ms and A has no float
// left: a profiler's delay in the trace is no longer slack a plan can spend.
TEST_F(ReplayFixture, TheCpuSideGpuBoundLeavesNoSlackInACpuBoundGap) {
  model::Workload w = cpu_bound_gap(*this);
  w.cpu_time_scale = 0;
  graph::StepGraph g = graph::build_step_graph(w);
  ASSERT_TRUE(g.dependency);
  EXPECT_NEAR(g.cpu_period_ns, 2 * graph::kMinCpuPerEventNs, 1e-6);  // two stretches of CPU work per step
  EXPECT_NEAR(g.launch_ns[1], -5e3 + graph::kMinCpuPerEventNs, 1e-6);
  EXPECT_NE(g.note.find("the CPU side GPU-bound"), std::string::npos) << g.note;
  SimResult r = simulate(w, m, default_schedule(w, m), 0, true);
  EXPECT_NEAR(r.step_time_ns, 2e6, 1e-3);
  EXPECT_NEAR(r.timeline[1].start_ns, 1e6, 1e-3);
  EXPECT_NEAR(r.slack_ns[0], 0, 1e-6);  // was 2 ms as traced (TracedTimesAreReplayedExactly)
  SimResult slow = simulate(w, m, with(2, 0), 0);
  EXPECT_NEAR(slow.step_time_ns, 2e6 + (kSlowFactor - 1) * 1e6, 1e-3);
}

// A tracer's cost per call taken out (scale 1, less 3 µs): each stretch of CPU work loses 3 µs, the CPU-bound step
// 6 µs; the stretches inside a synchronize (the CPU waiting for the GPU) are kept and the wait recomputed.
TEST_F(ReplayFixture, ATracersCostPerCallIsTakenOutOfEachCpuStretch) {
  model::Workload w = cpu_bound_gap(*this);
  w.cpu_less_per_event_ns = 3e3;
  graph::StepGraph gw = graph::build_step_graph(w);
  EXPECT_NEAR(gw.launch_ns[1], 2.995e6 - 3e3, 1e-6);
  EXPECT_NEAR(gw.cpu_period_ns, 4e6 - 6e3, 1e-6);
  SimResult r = simulate(w, m, default_schedule(w, m), 0, true);
  EXPECT_NEAR(r.step_time_ns, 4e6 - 6e3, 1e-3);
  // A, traced just as B of the step before ended, now follows B's end 3 µs after its launch: B is 6 µs nearer.
  EXPECT_NEAR(r.slack_ns[0], 2e6 - 6e3, 1e-3);
  // A synchronize waits for A, returns 5 µs after it ends, B is launched 45 µs later. GPU-bound: the 105 µs before
  // the synchronize and the 45 µs after it become 3 µs each; the synchronize still returns 5 µs after A's end.
  model::Workload y = sync_then_launch(*this);
  y.cpu_time_scale = 0;
  graph::StepGraph g = graph::build_step_graph(y);
  ASSERT_EQ(g.syncs.size(), 1u);
  EXPECT_NEAR(g.syncs[0].enter_ns, -5e3 + 3e3, 1e-6);
  EXPECT_NEAR(g.syncs[0].exit_ns - g.syncs[0].enter_ns, 0.905e6, 1e-6);  // the wait kept, recomputed by the replay
  EXPECT_NEAR(g.launch_ns[1], g.syncs[0].exit_ns + 3e3, 1e-6);
  SimResult s = simulate(y, m, default_schedule(y, m), 0, true);
  // B is launched 1.008 ms (A's end, the return, 3 µs of CPU) and starts at its stream's gap after A, which this
  // two-op trace makes 45 µs (the typical gap of its steps): 1.045 ms; the step 2.09 ms for the traced 2.1.
  EXPECT_NEAR(s.timeline[1].start_ns, 1e6 + 45e3, 1e-3);
  EXPECT_NEAR(s.step_time_ns, 2.09e6, 1e-3);
  EXPECT_THROW(graph::shrink_cpu_time(g, -0.1), std::invalid_argument);
  EXPECT_THROW(graph::shrink_cpu_time(g, 1.5), std::invalid_argument);
  EXPECT_THROW(graph::shrink_cpu_time(g, 1, -1), std::invalid_argument);
}

TEST_F(ReplayFixture, WithoutLaunchEventsTheFallbackSaysSo) {
  model::Workload w = cpu_bound_gap(*this);
  for (auto& o : w.ops) o.launch_known = false;
  graph::StepGraph g = graph::build_step_graph(w);
  EXPECT_FALSE(g.dependency);
  EXPECT_NE(g.note.find("no launch events"), std::string::npos) << g.note;
  SimResult r = simulate(w, m, default_schedule(w, m), 0, true);
  EXPECT_FALSE(r.dependency_replay);
  EXPECT_TRUE(r.slack_ns.empty());
}

}  // namespace
}  // namespace gearshift::sim
