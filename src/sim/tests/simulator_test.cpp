#include "sim/simulator.hpp"

#include <gtest/gtest.h>

#include "graph/board_gaps.hpp"

namespace gearshift::sim {
namespace {

model::WorkloadOp op_of(model::KernelClass cls, double t_ns, double gap_ns, std::int32_t stream, const model::DvfsModel& m) {
  model::WorkloadOp op;
  op.cls = cls;
  op.coeffs = model::class_prior(cls);
  op.ref_time_ns = t_ns;
  op.ref = m.default_reference(op.coeffs);
  op.gap_before_ns = gap_ns;
  op.stream = stream;
  return op;
}

struct SimFixture : ::testing::Test {
  model::DvfsModel m{gpu::find_spec("h200")};
};

TEST_F(SimFixture, BaselineOfSerialOpsAddsTimesGapsAndIdle) {
  model::Workload w;
  w.ops = {op_of(model::KernelClass::elementwise, 1e6, 0, 7, m), op_of(model::KernelClass::elementwise, 2e6, 5e5, 7, m)};
  w.tail_ns = 1e6;
  SimResult r = simulate(w, m, default_schedule(w, m), 0, true);
  EXPECT_NEAR(r.step_time_ns, 1e6 + 5e5 + 2e6 + 1e6, 1e-6);
  auto p = m.predict(1e6, w.ops[0].ref, {1980, 3201}, w.ops[0].coeffs);
  double idle = m.idle_power_w(1980);
  // busy 3 ms at power P, idle 1.5 ms at idle power, and in the gaps after each op (0.5 ms; the 1 ms tail) the
  // fall from P to idle: (P - idle)·τ·(1 - exp(-G/τ)), τ = 70 µs on the H200
  ASSERT_DOUBLE_EQ(m.params().gap_decay_ns, 70e3);
  const double fall = (p.power_w - idle) * (m.gap_tail_ns(5e5) + m.gap_tail_ns(1e6)) * 1e-9;
  EXPECT_NEAR(fall, (p.power_w - idle) * 2 * 70e-6, 1e-3 * fall);  // both gaps far longer than τ
  EXPECT_NEAR(r.gap_tail_j, fall, 1e-12);
  EXPECT_NEAR(r.energy_j, p.power_w * 3e-3 + idle * 1.5e-3 + fall, 1e-9);
  ASSERT_EQ(r.timeline.size(), 2u);
  EXPECT_DOUBLE_EQ(r.timeline[1].start_ns, 1.5e6);
  EXPECT_EQ(r.clock_changes, 0u);
}

TEST_F(SimFixture, PhasesAtLeastLLongRunAsWithInstantSwitching) {
  model::Workload w;
  for (int i = 0; i < 4; ++i) w.ops.push_back(op_of(model::KernelClass::elementwise, 1e6, 0, 7, m));
  plan::Schedule s{plan::Strategy::baseline, 0, {{1980, 3201}, {1980, 3201}, {990, 3201}, {990, 3201}}, 0};
  SimResult ideal = simulate(w, m, s, 0, true);
  // Two changes per step: to 990 at position 2 and back to 1980 at position 0 (cyclic).
  EXPECT_EQ(ideal.clock_changes, 2u);
  EXPECT_EQ(ideal.late_changes, 0u);
  EXPECT_EQ(ideal.timeline[2].requested.sm_mhz, 990);
  // Ideal: the previous step ended on 990; the change back to 1980 at position 0 lands at once.
  EXPECT_EQ(ideal.timeline[0].requested.sm_mhz, 1980);
  EXPECT_EQ(ideal.timeline[3].requested.sm_mhz, 990);
  // elementwise prior a = 0.15, b = 0.75: at 990 MHz an op takes 1 ms · (0.15·2 + 0.75 + 0.10) = 1.15 ms.
  EXPECT_NEAR(ideal.step_time_ns, (2 * 1.0 + 2 * 1.15) * 1e6, 1e-3);
  // L = 1.5 ms: each change is issued 1.5 ms before its op and both phases last longer (2 ms at 1980, 2.3 ms
  // at 990 across the wrap): exactly the instant-switching figures.
  SimResult l15 = simulate(w, m, s, 1.5e6, true);
  EXPECT_EQ(l15.late_changes, 0u);
  EXPECT_EQ(l15.step_time_ns, ideal.step_time_ns);
  EXPECT_EQ(l15.energy_j, ideal.energy_j);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(l15.timeline[i].requested, ideal.timeline[i].requested);
}

TEST_F(SimFixture, OldClocksHoldWhenAPhaseIsShorterThanL) {
  model::Workload w;
  for (int i = 0; i < 4; ++i) w.ops.push_back(op_of(model::KernelClass::elementwise, 1e6, 0, 7, m));
  // The 990 phase (op 1, 1.15 ms) is shorter than L = 1.5 ms: the change back to 1980, issued when the one
  // to 990 lands (1.0 ms), lands at 2.5 ms; op 2 starts at 2.15 ms and still runs at 990.
  plan::Schedule s{plan::Strategy::baseline, 0, {{1980, 3201}, {990, 3201}, {1980, 3201}, {1980, 3201}}, 0};
  SimResult r = simulate(w, m, s, 1.5e6, true);
  EXPECT_EQ(r.clock_changes, 2u);
  EXPECT_EQ(r.late_changes, 1u);
  EXPECT_EQ(r.timeline[1].requested.sm_mhz, 990);
  EXPECT_EQ(r.timeline[2].requested.sm_mhz, 990);
  EXPECT_EQ(r.timeline[3].requested.sm_mhz, 1980);
  EXPECT_NEAR(r.timeline[2].start_ns, 2.15e6, 1e-6);
  EXPECT_NEAR(r.step_time_ns, (1.0 + 1.15 + 1.15 + 1.0) * 1e6, 1e-3);
}

TEST_F(SimFixture, AChangeLateAtTheStepEndLandsInTheNextStep) {
  model::Workload w;
  for (int i = 0; i < 4; ++i) w.ops.push_back(op_of(model::KernelClass::elementwise, 1e6, 0, 7, m));
  // The 990 phase is the last op (1.15 ms < L = 1.5 ms): the change back to 1980 for position 0 lands 0.35 ms
  // into the next step, so op 0 runs at 990 in the steady state.
  plan::Schedule s{plan::Strategy::baseline, 0, {{1980, 3201}, {1980, 3201}, {1980, 3201}, {990, 3201}}, 0};
  SimResult r = simulate(w, m, s, 1.5e6, true);
  EXPECT_EQ(r.late_changes, 1u);
  EXPECT_EQ(r.timeline[0].requested.sm_mhz, 990);
  EXPECT_EQ(r.timeline[1].requested.sm_mhz, 1980);
  EXPECT_EQ(r.timeline[3].requested.sm_mhz, 990);
  EXPECT_NEAR(r.step_time_ns, (1.15 + 1.0 + 1.0 + 1.15) * 1e6, 1e-3);
}

TEST_F(SimFixture, IdlePowerFollowsTheClocksOfTheLastOpStarted) {
  model::Workload w;
  w.ops = {op_of(model::KernelClass::elementwise, 1e6, 0, 7, m), op_of(model::KernelClass::elementwise, 1e6, 2e6, 7, m)};
  plan::Schedule s{plan::Strategy::baseline, 0, {{990, 3201}, {1980, 3201}}, 0};
  SimResult r = simulate(w, m, s, 0);
  // Op 0 at 990 MHz, then the 2 ms gap at op 0's clocks, then op 1 at 1980; the step's head (none) and end at
  // op 1's clocks.
  auto p0 = m.predict(1e6, w.ops[0].ref, {990, 3201}, w.ops[0].coeffs);
  auto p1 = m.predict(1e6, w.ops[1].ref, {1980, 3201}, w.ops[1].coeffs);
  const double dyn = (p0.power_w - p0.idle_power_w) * p0.time_ns * 1e-9 + (p1.power_w - p1.idle_power_w) * p1.time_ns * 1e-9;
  const double idle = m.idle_power_w(990) * (p0.time_ns + 2e6) * 1e-9 + m.idle_power_w(1980) * p1.time_ns * 1e-9;
  // The 2 ms gap after op 0 holds the fall from op 0's power to idle, at the default clocks whatever op 0 ran at
  // (the fall was measured there only: a plan saves nothing on it); op 1 ends the step, and the next step's op 0
  // starts at once.
  auto p0_default = m.predict(1e6, w.ops[0].ref, {1980, 3201}, w.ops[0].coeffs);
  const double fall = (p0_default.power_w - p0_default.idle_power_w) * m.gap_tail_ns(2e6) * 1e-9;
  EXPECT_GT(p0_default.power_w - p0_default.idle_power_w, p0.power_w - p0.idle_power_w);
  EXPECT_NEAR(r.energy_j, dyn + idle + fall, 1e-12);
  // A latency both phases outlast gives the same figures.
  SimResult l = simulate(w, m, s, 1e6);
  EXPECT_EQ(l.late_changes, 0u);
  EXPECT_EQ(l.energy_j, r.energy_j);
}

TEST_F(SimFixture, StreamsOverlap) {
  model::Workload w;
  w.ops = {op_of(model::KernelClass::gemm, 4e6, 0, 7, m), op_of(model::KernelClass::communication, 3e6, 0, 20, m),
           op_of(model::KernelClass::gemm, 1e6, 0, 7, m)};
  SimResult r = simulate(w, m, default_schedule(w, m), 0);
  EXPECT_NEAR(r.step_time_ns, 5e6, 1e-3);  // stream 20's 3 ms hides under stream 7's 5 ms
  EXPECT_NEAR(r.busy_time_ns, 8e6, 1e-3);
}

// Measured on an H200 (bench/device/gap_power.py, bench/results/2026-12-01-s10-gap-power.md): after a kernel the
// board's power falls to idle over tens of µs, so a gap of a few µs costs nearly the kernel's power and a gap of ms
// nearly the idle power. Before, every gap was charged at idle: a job of short gaps could not be given its measured
// power.
TEST_F(SimFixture, AShortGapCostsNearlyTheKernelsPowerALongOneTheIdlePower) {
  const double idle = m.idle_power_w(1980);
  auto gap_power_w = [&](double gap_ns) {  // the average power over a gap after a 1 ms GEMM
    model::Workload w;
    w.ops = {op_of(model::KernelClass::gemm, 1e6, gap_ns, 7, m)};
    SimResult r = simulate(w, m, default_schedule(w, m), 0);
    const auto p = m.predict(1e6, w.ops[0].ref, {1980, 3201}, w.ops[0].coeffs);
    // the GEMM's power above idle (its clock is capped; the gap idles at the requested 1980 MHz)
    const double above = p.power_w - p.idle_power_w;
    return std::pair{(r.energy_j - (above + idle) * p.time_ns * 1e-9) / (gap_ns * 1e-9), above};
  };
  const auto [short_w, above_w] = gap_power_w(5e3);
  EXPECT_GT(short_w, idle + 0.95 * above_w);  // 5 µs: 97 % of the way to the GEMM's power
  const auto [long_w, ignored] = gap_power_w(10e6);
  EXPECT_NEAR(long_w, idle + above_w * 70e3 / 10e6, 1e-6);  // 10 ms: idle, plus 70 µs at the GEMM's
  EXPECT_LT(long_w, idle + 0.01 * above_w);
  // Without the measured fall (a GPU whose spec has none) a gap is idle at once.
  model::PowerParams pp = m.params();
  pp.gap_decay_ns = 0;
  model::DvfsModel at_once(m.spec(), pp);
  model::Workload w;
  w.ops = {op_of(model::KernelClass::gemm, 1e6, 5e3, 7, at_once)};
  EXPECT_EQ(simulate(w, at_once, default_schedule(w, at_once), 0).gap_tail_j, 0.0);
}

// Only the board's gaps count: an op on another stream that runs over the gap fills it.
TEST(BoardGaps, AGapIsWhereNoOpRunsAndBelongsToTheOpEndingLastBeforeIt) {
  // op 0 [0, 10), op 1 [2, 4) on another stream, op 2 [12, 15), op 3 [13, 20) on another stream; next step at 25.
  const std::vector<double> start{0, 2, 12, 13}, end{10, 4, 15, 20};
  const std::vector<double> gap = graph::board_gaps_after_ns(start, end, 25);
  EXPECT_EQ(gap, (std::vector<double>{2, 0, 0, 5}));
  // Any order; an op inside another's span leaves no gap.
  const std::vector<double> gap2 = graph::board_gaps_after_ns({12, 0, 2}, {15, 10, 4}, 15);
  EXPECT_EQ(gap2, (std::vector<double>{0, 2, 0}));
  EXPECT_THROW(graph::board_gaps_after_ns({0}, {}, 1), std::invalid_argument);
}

TEST_F(SimFixture, RejectsAScheduleOfAnotherLength) {
  model::Workload w;
  w.ops = {op_of(model::KernelClass::gemm, 1e6, 0, 7, m)};
  plan::Schedule s{plan::Strategy::baseline, 0, {}, 0};
  EXPECT_THROW(simulate(w, m, s, 0), std::invalid_argument);
}

}  // namespace
}  // namespace gearshift::sim
