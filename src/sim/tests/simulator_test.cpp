#include "sim/simulator.hpp"

#include <gtest/gtest.h>

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
  EXPECT_NEAR(r.step_time_s, (1e6 + 5e5 + 2e6 + 1e6) * 1e-9, 1e-15);
  auto p = m.predict(1e6, w.ops[0].ref, {1980, 3201}, w.ops[0].coeffs);
  double idle = m.idle_power_w(1980);
  // busy 3 ms at power P, idle 1.5 ms at idle power
  EXPECT_NEAR(r.energy_j, p.power_w * 3e-3 + idle * 1.5e-3, 1e-9);
  ASSERT_EQ(r.timeline.size(), 2u);
  EXPECT_DOUBLE_EQ(r.timeline[1].start_ns, 1.5e6);
  EXPECT_EQ(r.clock_changes, 0u);
}

TEST_F(SimFixture, OldClocksHoldDuringTheTransitionWindow) {
  model::Workload w;
  for (int i = 0; i < 4; ++i) w.ops.push_back(op_of(model::KernelClass::elementwise, 1e6, 0, 7, m));
  plan::Schedule s{"x", 0, {{1980, 3201}, {1980, 3201}, {990, 3201}, {990, 3201}}, 0};
  SimResult ideal = simulate(w, m, s, 0, true);
  SimResult slow = simulate(w, m, s, 1.5e6, true);
  // Two changes per step: to 990 at position 2 and back to 1980 at position 0 (cyclic).
  EXPECT_EQ(ideal.clock_changes, 2u);
  EXPECT_EQ(ideal.timeline[2].requested.sm_mhz, 990);
  // Ideal: the previous step ended on 990; the change back to 1980 at position 0 lands at once.
  EXPECT_EQ(ideal.timeline[0].requested.sm_mhz, 1980);
  EXPECT_EQ(ideal.timeline[3].requested.sm_mhz, 990);
  // elementwise prior a = 0.15, b = 0.75: at 990 MHz an op takes 1 ms · (0.15·2 + 0.75 + 0.10) = 1.15 ms.
  EXPECT_NEAR(ideal.step_time_s, (2 * 1.0 + 2 * 1.15) * 1e-3, 1e-12);
  // L = 1.5 ms: the change issued at op 0 lands at 1.5 ms, so ops 0 and 1 (starting at 0 and 1.15 ms) still
  // run at 990; the change issued at op 2 (2.3 ms) lands at 3.8 ms, after op 3 started (3.3 ms): 1980.
  EXPECT_EQ(slow.timeline[0].requested.sm_mhz, 990);
  EXPECT_EQ(slow.timeline[1].requested.sm_mhz, 990);
  EXPECT_EQ(slow.timeline[2].requested.sm_mhz, 1980);
  EXPECT_EQ(slow.timeline[3].requested.sm_mhz, 1980);
  EXPECT_NEAR(slow.timeline[2].start_ns, 2.3e6, 1e-6);
}

TEST_F(SimFixture, StreamsOverlap) {
  model::Workload w;
  w.ops = {op_of(model::KernelClass::gemm, 4e6, 0, 7, m), op_of(model::KernelClass::communication, 3e6, 0, 20, m),
           op_of(model::KernelClass::gemm, 1e6, 0, 7, m)};
  SimResult r = simulate(w, m, default_schedule(w, m), 0);
  EXPECT_NEAR(r.step_time_s, 5e-3, 1e-12);  // stream 20's 3 ms hides under stream 7's 5 ms
  EXPECT_NEAR(r.busy_time_s, 8e-3, 1e-12);
}

TEST_F(SimFixture, RejectsAScheduleOfAnotherLength) {
  model::Workload w;
  w.ops = {op_of(model::KernelClass::gemm, 1e6, 0, 7, m)};
  plan::Schedule s{"x", 0, {}, 0};
  EXPECT_THROW(simulate(w, m, s, 0), std::invalid_argument);
}

}  // namespace
}  // namespace gearshift::sim
