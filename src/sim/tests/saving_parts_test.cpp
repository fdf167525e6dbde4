// What a plan's saving rests on (sim/saving_parts.hpp, graph/waits.hpp) on hand-built steps whose waits are known.
#include "sim/saving_parts.hpp"

#include <gtest/gtest.h>

#include "graph/step_graph.hpp"
#include "graph/waits.hpp"
#include "sim/simulator.hpp"

namespace gearshift::sim {
namespace {

constexpr model::ClockPair kDefault{1980, 3201}, kSlow{990, 3201};

struct PartsFixture : ::testing::Test {
  model::DvfsModel m{gpu::find_spec("h200")};
  // An op as traced at default clocks: GPU start, duration and the CPU time of its launch (ns, step-relative).
  model::WorkloadOp op(double start, double dur, double launch, std::int32_t stream = 7,
                       model::KernelClass cls = model::KernelClass::elementwise) {
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
  static plan::Schedule slow_at(std::size_t n, std::vector<std::size_t> slow) {
    plan::Schedule s{plan::Strategy::baseline, 0, std::vector<model::ClockPair>(n, kDefault), 0};
    for (auto i : slow) s.clocks[i] = kSlow;
    return s;
  }
  // The dynamic energy one op saves at kSlow (its power above idle times its time), J.
  double op_saving_j(const model::WorkloadOp& o) const {
    const model::Prediction a = model::predict_op(m, o, kDefault), b = model::predict_op(m, o, kSlow);
    return (a.power_w - a.idle_power_w) * a.time_ns * 1e-9 - (b.power_w - b.idle_power_w) * b.time_ns * 1e-9;
  }
  std::vector<graph::OpWait> waits(const model::Workload& w) const {
    const graph::StepGraph g = graph::build_step_graph(w);
    EXPECT_TRUE(g.dependency) << g.note;
    const SimResult base = simulate(w, m, default_schedule(w, m), 0, true);
    std::vector<double> d;
    std::vector<std::uint8_t> comm;
    for (std::size_t i = 0; i < w.ops.size(); ++i) {
      d.push_back(base.timeline[i].end_ns - base.timeline[i].start_ns);
      comm.push_back(w.ops[i].cls == model::KernelClass::communication);
    }
    return graph::waits_after(g, graph::replay_fixed(g, d), comm);
  }
  double saving_j(const model::Workload& w, const plan::Schedule& s) const {
    return simulate(w, m, default_schedule(w, m), 0).energy_j - simulate(w, m, s, 0).energy_j;
  }
};

std::size_t at(graph::WaitKind k) { return static_cast<std::size_t>(k); }

// A: 1 ms; the CPU then prepares the next batch and launches B at 3 ms (the GPU idles 2 ms); step 4 ms.
TEST_F(PartsFixture, AKernelSlowedIntoALaunchBoundGapRestsOnThatWait) {
  model::Workload w;
  w.ops = {op(0, 1e6, -5e3), op(3e6, 1e6, 2.995e6)};
  w.period_ns = 4e6;
  const auto wt = waits(w);
  EXPECT_NEAR(wt[0].float_ns, 2e6, 1e-3);
  EXPECT_EQ(wt[0].kind, graph::WaitKind::launch_bound);
  EXPECT_NEAR(wt[1].float_ns, 0, 1e-3);  // the next step's A is launched 5 µs before B ends
  const SavingParts p = saving_parts(w, m, slow_at(2, {0}), 0);
  EXPECT_TRUE(p.dependency_replay);
  EXPECT_NEAR(p.saving_j, saving_j(w, slow_at(2, {0})), 1e-12);
  // A's 0.15 ms of slowing fits in the 2 ms wait: its whole dynamic saving rests on the launch-bound wait.
  EXPECT_NEAR(p.waits_j[at(graph::WaitKind::launch_bound)], op_saving_j(w.ops[0]), 1e-12);
  EXPECT_NEAR(p.busy_kernels_j, 0, 1e-12);
  EXPECT_NEAR(p.busy_kernels_j + p.waits_total_j() + p.idle_j, p.saving_j, 1e-12);
  EXPECT_GT(p.idle_j, 0);  // the board idles at 990 MHz while A runs
  EXPECT_NE(p.line().find("launch-bound"), std::string::npos) << p.line();
}

TEST_F(PartsFixture, AKernelSlowedOnTheCriticalPathIsTheBusyKernelsPart) {
  // A and B back to back, B launched early; the next step's A is launched early too: no wait anywhere.
  model::Workload w;
  w.ops = {op(0, 1e6, -5e5), op(1e6, 1e6, 0)};
  w.period_ns = 2e6;
  const auto wt = waits(w);
  EXPECT_NEAR(wt[0].float_ns, 0, 1e-3);
  const SavingParts p = saving_parts(w, m, slow_at(2, {1}), 0);
  EXPECT_NEAR(p.busy_kernels_j, op_saving_j(w.ops[1]), 1e-12);
  EXPECT_NEAR(p.waits_total_j(), 0, 1e-15);
  EXPECT_NEAR(p.busy_kernels_j + p.idle_j, p.saving_j, 1e-12);
}

TEST_F(PartsFixture, BackToBackKernelsShareTheWaitAtTheirChainsEnd) {
  // A then B back to back (B launched early), then C launched at 5 ms: A has no float of its own, but slowing it
  // moves only B, whose 3 ms wait absorbs both (the step keeps its length).
  model::Workload w;
  w.ops = {op(0, 1e6, -5e3), op(1e6, 1e6, 0), op(5e6, 1e6, 4.995e6)};
  w.period_ns = 6e6;
  const auto wt = waits(w);
  EXPECT_EQ(wt[0].chain_next, 1);
  EXPECT_NEAR(wt[1].float_ns, 3e6, 1e-3);
  const plan::Schedule s = slow_at(3, {0, 1});
  EXPECT_NEAR(simulate(w, m, s, 0).step_time_ns, 6e6, 1e-3);
  const SavingParts p = saving_parts(w, m, s, 0);
  EXPECT_NEAR(p.waits_j[at(graph::WaitKind::launch_bound)], op_saving_j(w.ops[0]) + op_saving_j(w.ops[1]), 1e-12);
  EXPECT_NEAR(p.busy_kernels_j, 0, 1e-12);
  // A 0.1 ms wait instead of 3 ms: of the 0.3 ms the two kernels are slowed, a third fits.
  w.ops[2] = op(2.1e6, 1e6, 2.095e6);
  w.period_ns = 3.1e6;
  const SavingParts q = saving_parts(w, m, s, 0);
  const double both = op_saving_j(w.ops[0]) + op_saving_j(w.ops[1]);
  EXPECT_NEAR(q.waits_j[at(graph::WaitKind::launch_bound)], both / 3, 1e-9);
  EXPECT_NEAR(q.busy_kernels_j, both * 2 / 3, 1e-9);
}

TEST_F(PartsFixture, AWaitAfterAGpuBoundSynchronizeIsTheSynchronizesKind) {
  // Stream 7: A (1 ms), which a stream synchronize waits for; stream 9: C (0.1 ms), then B, launched 45 µs after the
  // synchronize returned. C's float ends where B waits for the CPU coming back from the synchronize.
  model::Workload w;
  w.ops = {op(0, 1e6, -5e3, 7), op(0, 0.1e6, -4e3, 9), op(1.055e6, 0.5e6, 1.05e6, 9)};
  w.period_ns = 2.1e6;
  trace::TemplateSync y;
  y.scope = trace::SyncRecord::Scope::stream;
  y.stream = 7;
  y.enter_offset_ns = 0.2e6;
  y.duration_ns = 0.805e6;
  y.samples = 3;
  w.syncs = {y};
  w.syncs_known = true;
  const auto wt = waits(w);
  EXPECT_NEAR(wt[0].float_ns, 0, 1e-3);  // the synchronize waits for A
  EXPECT_EQ(wt[1].kind, graph::WaitKind::synchronize);
  const graph::StepGraph g = graph::build_step_graph(w);
  EXPECT_NEAR(wt[1].float_ns, 1.055e6 - g.min_gap_ns[2] - 0.1e6, 1e-3);  // to B's start, less the stream's least gap
  EXPECT_GT(wt[1].float_ns, 0.1e6);
  const SavingParts p = saving_parts(w, m, slow_at(3, {1}), 0);
  EXPECT_NEAR(p.waits_j[at(graph::WaitKind::synchronize)], op_saving_j(w.ops[1]), 1e-12);
  EXPECT_NE(p.line().find("synchronize"), std::string::npos) << p.line();
}

TEST_F(PartsFixture, AKernelBeforeACollectiveThatWaitsForAnotherStreamIsTheCollectiveKind) {
  // Stream 7: A (1 ms); stream 9: X (0.1 ms), then the all-reduce, launched early, which starts 3 µs after A ends
  // (an event wait for the gradients' last kernel). X may run 0.9 ms longer: it lies in the collective's wait.
  model::Workload w;
  w.ops = {op(0, 1e6, -5e3, 7), op(0, 0.1e6, -4e3, 9), op(1.003e6, 0.8e6, 0, 9, model::KernelClass::communication)};
  w.period_ns = 2e6;
  const graph::StepGraph g = graph::build_step_graph(w);
  ASSERT_EQ(g.wait_on[2], 0);
  const auto wt = waits(w);
  EXPECT_NEAR(wt[0].float_ns, 0, 1e-3);  // the all-reduce waits for A
  EXPECT_EQ(wt[1].kind, graph::WaitKind::collective);
  EXPECT_NEAR(wt[1].float_ns, 0.903e6 - g.min_gap_ns[2], 1e-3);
  const SavingParts p = saving_parts(w, m, slow_at(3, {1}), 0);
  EXPECT_NEAR(p.waits_j[at(graph::WaitKind::collective)], op_saving_j(w.ops[1]), 1e-12);
  // The same wait on a copy instead of a collective: cross-stream.
  w.ops[2].cls = model::KernelClass::elementwise;
  EXPECT_EQ(waits(w)[1].kind, graph::WaitKind::cross_stream);
}

TEST_F(PartsFixture, FloatsEqualTheReplaysFreeFloat) {
  model::Workload w;
  w.ops = {op(0, 1e6, -5e3), op(1e6, 1e6, 0), op(5e6, 1e6, 4.995e6), op(0, 0.1e6, -4e3, 9)};
  w.period_ns = 6e6;
  const SimResult base = simulate(w, m, default_schedule(w, m), 0, true);
  const auto wt = waits(w);
  ASSERT_EQ(base.slack_ns.size(), wt.size());
  for (std::size_t i = 0; i < wt.size(); ++i) EXPECT_NEAR(wt[i].float_ns, base.slack_ns[i], 1e-6) << i;
}

TEST_F(PartsFixture, WithoutLaunchEventsNoSlowingLandsInAWait) {
  model::Workload w;
  w.ops = {op(0, 1e6, -5e3), op(3e6, 1e6, 2.995e6)};
  for (auto& o : w.ops) o.launch_known = false;
  w.ops[1].gap_before_ns = 2e6;
  w.period_ns = 4e6;
  const SavingParts p = saving_parts(w, m, slow_at(2, {0}), 0);
  EXPECT_FALSE(p.dependency_replay);
  EXPECT_NEAR(p.waits_total_j(), 0, 1e-15);
  EXPECT_NEAR(p.busy_kernels_j, op_saving_j(w.ops[0]), 1e-12);
  EXPECT_NEAR(p.busy_kernels_j + p.idle_j, p.saving_j, 1e-12);
}

TEST_F(PartsFixture, RefusesAScheduleOfAnotherSize) {
  model::Workload w;
  w.ops = {op(0, 1e6, -5e3)};
  w.period_ns = 2e6;
  EXPECT_THROW(saving_parts(w, m, slow_at(2, {0}), 0), std::invalid_argument);
}

}  // namespace
}  // namespace gearshift::sim
