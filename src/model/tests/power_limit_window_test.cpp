// The power limit held on a window's average (gpu::GpuSpec::power_limit_window_ns): each template position's
// idle share of the window that ends with it (model/workload.hpp) and the limit its kernel then meets
// (DvfsModel::power_limit_w).
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/spec.hpp"
#include "model/dvfs_model.hpp"
#include "model/workload.hpp"

namespace gearshift::model {
namespace {

WorkloadOp op_at(double start_ns, double time_ns, std::int32_t stream = 7) {
  WorkloadOp op;
  op.cls = KernelClass::gemm;
  op.coeffs = class_prior(op.cls);
  op.start_offset_ns = start_ns;
  op.ref_time_ns = time_ns;
  op.stream = stream;
  return op;
}

TEST(PowerLimitWindow, IdleShareCountsTheGapsInTheWindowEndingWithEachOp) {
  Workload w;
  w.period_ns = 2e6;  // 2 ms step: kernels 0–0.5 ms and 0.6–1.6 ms, idle 0.5–0.6 ms and 1.6–2.0 ms
  w.ops = {op_at(0, 5e5), op_at(6e5, 1e6)};
  set_window_idle_shares(w, 6e5, 0);
  // Op 0 ends at 0.5 ms: its window [−0.1, 0.5] ms holds the last 0.1 ms of the previous step's gap.
  EXPECT_NEAR(w.ops[0].window_idle_share, 0.1 / 0.6, 1e-12);
  // Op 1 (1 ms) is longer than the window: the window lies inside it.
  EXPECT_DOUBLE_EQ(w.ops[1].window_idle_share, 0);
  // A shorter op after the 0.1 ms gap: [0.1, 0.7] ms holds the gap 0.5–0.6 ms.
  w.ops = {op_at(0, 5e5), op_at(6e5, 1e5)};
  set_window_idle_shares(w, 6e5, 0);
  EXPECT_NEAR(w.ops[1].window_idle_share, 0.1 / 0.6, 1e-12);
}

TEST(PowerLimitWindow, TheFallToIdleKeepsTheStartOfEachGapBusy) {
  Workload w;
  w.period_ns = 2e6;
  w.ops = {op_at(0, 5e5), op_at(6e5, 1e5)};
  const double tau = 7e4;
  set_window_idle_shares(w, 6e5, tau);
  const double idle = 1e5 - tau * (1 - std::exp(-1e5 / tau));  // of the 0.1 ms gap, ≈ 0.048 ms
  EXPECT_NEAR(w.ops[1].window_idle_share, idle / 6e5, 1e-9);
  // Gaps of a few µs between back-to-back kernels stay at the kernels' power: no headroom.
  Workload dense;
  dense.period_ns = 1e6;
  for (int i = 0; i < 100; ++i) dense.ops.push_back(op_at(i * 1e4, 9.5e3));  // 0.5 µs gaps
  set_window_idle_shares(dense, 6e5, tau);
  for (const auto& op : dense.ops) EXPECT_LT(op.window_idle_share, 2e-4);  // 0.0018 µs idle per gap
  // Without the fall every gap would count: 5 % of the window.
  set_window_idle_shares(dense, 6e5, 0);
  EXPECT_NEAR(dense.ops[50].window_idle_share, 0.05, 1e-3);
}

TEST(PowerLimitWindow, OverlappingStreamsAreOneBusySpanAndNoWindowMeansNoShare) {
  Workload w;
  w.period_ns = 1e6;
  w.ops = {op_at(0, 6e5, 7), op_at(3e5, 6e5, 9)};  // busy 0–0.9 ms across two streams
  set_window_idle_shares(w, 6e5, 0);
  EXPECT_DOUBLE_EQ(w.ops[1].window_idle_share, 0);
  EXPECT_NEAR(w.ops[0].window_idle_share, 0, 1e-12);  // [0, 0.6] ms: busy throughout
  set_window_idle_shares(w, 0, 0);
  for (const auto& op : w.ops) EXPECT_DOUBLE_EQ(op.window_idle_share, 0);
}

TEST(PowerLimitWindow, AKernelNextToIdleMayDrawAboveTheCap) {
  const gpu::GpuSpec h200 = gpu::find_spec("h200");
  EXPECT_DOUBLE_EQ(h200.power_limit_window_ns, 600'000);
  const DvfsModel m(h200);
  EXPECT_DOUBLE_EQ(m.power_limit_w(0), 700);
  // 10 % of the window at the 122 W idle power: (700 − 12.2) / 0.9.
  EXPECT_NEAR(m.power_limit_w(0.1), (700 - 122 * 0.1) / 0.9, 1e-9);
  const KernelCoefficients gemm = class_prior(KernelClass::gemm);
  const ClockPair def{1980, 3201};
  // About the sag measured at the cap (1875 MHz, data/gpus/h200.json; the prior's power lands there to rounding).
  const int at_cap = m.capped_sm_clock(def, gemm);
  EXPECT_NEAR(at_cap, 1875, 15);
  EXPECT_GT(m.capped_sm_clock(def, gemm, 0.05), at_cap);
  EXPECT_EQ(m.capped_sm_clock(def, gemm, 0.5), 1980);  // half the window idle: the limit does not bind
  const Prediction capped = m.predict(1e6, {1875, 3201}, def, gemm);
  const Prediction beside_gap = m.predict(1e6, {1875, 3201}, def, gemm, 0.05);
  EXPECT_LE(capped.power_w, 700);
  EXPECT_GT(capped.power_w, 680);
  EXPECT_GT(beside_gap.power_w, 700);
  EXPECT_LE(beside_gap.power_w, m.power_limit_w(0.05));
  EXPECT_LT(beside_gap.time_ns, capped.time_ns);
}

}  // namespace
}  // namespace gearshift::model
