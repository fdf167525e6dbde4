// The in-time check of a phase plan (service/plan_in_time.hpp): a plan whose changes the runtime cannot land at
// their boundaries on this job's steps is replaced by one with fewer, longer phases, down to one clock pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "runtime/clock_plan.hpp"
#include "runtime/replay.hpp"
#include "service/plan_in_time.hpp"
#include "service/plan_job.hpp"
#include "service/tests/kernel_sequence.hpp"
#include "trace/record.hpp"

namespace gearshift::service {
namespace {

// Steps of alternating GEMM and elementwise blocks (each 40 kernels of 200 µs, 8 ms), so that a phase plan at
// L = 6 ms slows the SM clock for the memory-bound blocks. `jitter_ms`: each block starts after a random idle gap
// of 0 to that many ms (a CPU-bound job whose steps vary), drawn anew in every step. The CPU launches each kernel
// 50 µs before it starts.
trace::Trace blocks_trace(int steps, double jitter_ms, unsigned seed = 3) {
  trace::Trace t;
  // Each block its own kernel name; the fused AdamW update ends the step (the step contract's evidence).
  t.names = {"nvjet_sm90_gemm_qkv", "vectorized_elementwise_kernel_add", "nvjet_sm90_gemm_up",
             "vectorized_elementwise_kernel_mul", "nvjet_sm90_gemm_down", "vectorized_elementwise_kernel_silu",
             "multi_tensor_apply_kernel<FusedAdamMathFunctor>"};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> gap(0, jitter_ms * 1e6);
  testing::KernelSequence seq(t);
  for (int s = 0; s < steps; ++s) {
    for (std::uint32_t b = 0; b < 6; ++b) {
      seq.idle(static_cast<std::int64_t>(gap(rng)) + 1'000);
      for (int k = 0; k < 40; ++k) seq.kernel(b, 200'000, 1'000);
    }
    for (int k = 0; k < 4; ++k) seq.kernel(6, 100'000, 1'000);
    seq.idle(2'000'000);  // the next batch
  }
  return t;
}

PlanJobOptions options(bool check) {
  PlanJobOptions o;
  o.display_name = "synthetic";
  o.gpu = "h200";
  o.calibrate = false;
  o.switch_latency_ns = 6e6;
  o.max_slowdown = 0.02;
  o.range_samples = 20;
  o.check_in_time = check;
  return o;
}

// The replayed in-time fraction of r's chosen plan, as the check replays it.
double replayed_in_time(const PlanJobOptions& o, const PlanJobResult& r) {
  runtime::ReplayOptions ro;
  ro.scheduler.switch_latency_ns = ro.scheduler.min_interval_ns = 6e6;
  ro.sync_progress = true;
  ro.marker_period_ns = 5e6;
  ro.max_steps = kInTimeCheckSteps + 1;
  return runtime::replay(r.trace, runtime::clock_plan_from(plan_file(o, r)), ro).in_time_fraction;
}

TEST(PlanInTime, ASteadyJobKeepsItsPhasePlan) {
  const PlanJobOptions o = options(true);
  const PlanJobResult r = plan_trace(o, blocks_trace(20, 0));
  ASSERT_TRUE(r.in_time.checked) << r.in_time.skipped;
  ASSERT_EQ(r.in_time.rungs.size(), 1u) << r.in_time.summary();
  EXPECT_EQ(r.chosen->schedule.strategy, plan::Strategy::phase);
  EXPECT_GE(r.chosen->sim.clock_changes, 2u) << r.in_time.summary();
  ASSERT_TRUE(r.in_time.rungs[0].in_time);
  EXPECT_GE(*r.in_time.rungs[0].in_time, kPlanMinInTime);
  EXPECT_EQ(r.in_time.steps_replayed, std::min<std::size_t>(19, kInTimeCheckSteps));  // steps after the first
  EXPECT_NE(r.in_time.summary().find("in time"), std::string::npos);
}

TEST(PlanInTime, AJobWhoseStepsVaryGetsAPlanItsChangesCanFollow) {
  const trace::Trace t = blocks_trace(40, 4);
  // Without the check: the phase plan at L, whose changes miss their boundaries on these steps.
  const PlanJobOptions off = options(false);
  const PlanJobResult before = plan_trace(off, t);
  EXPECT_FALSE(before.in_time.checked);
  EXPECT_GE(before.chosen->sim.clock_changes, 4u);
  const double before_in_time = replayed_in_time(off, before);
  EXPECT_LT(before_in_time, kPlanMinInTime);

  const PlanJobOptions on = options(true);
  const PlanJobResult r = plan_trace(on, t);
  ASSERT_TRUE(r.in_time.checked) << r.in_time.skipped;
  ASSERT_TRUE(r.in_time.coarsened()) << r.in_time.summary();
  ASSERT_TRUE(r.in_time.rungs.front().in_time);
  EXPECT_NEAR(*r.in_time.rungs.front().in_time, before_in_time, 1e-9);  // the same plan, the same replay
  EXPECT_EQ(r.chosen, r.in_time.taken()->plan);
  EXPECT_LT(r.chosen->sim.clock_changes, before.chosen->sim.clock_changes);
  EXPECT_LE(r.chosen->saving_pct, before.chosen->saving_pct + 1e-9);  // fewer changes save no more
  // What was taken can be followed: replayed again from its plan.json, it reaches the target (a one-pair plan has
  // no change inside the step to miss).
  if (r.chosen->sim.clock_changes > 0) {
    EXPECT_GE(replayed_in_time(on, r), kPlanMinInTime);
  }
  EXPECT_GE(replayed_in_time(on, r), before_in_time);
  // Said, with both figures.
  const bool warned = std::any_of(r.warnings.begin(), r.warnings.end(),
                                  [](const std::string& w) { return w.find("landed its clock changes in time") != std::string::npos; });
  EXPECT_TRUE(warned);
  const auto j = report_json(on, r);
  EXPECT_TRUE(j["in_time_check"]["coarsened"].get<bool>());
  EXPECT_EQ(j["in_time_check"]["rungs"].size(), r.in_time.rungs.size());
  // plan.json carries the plan taken.
  EXPECT_EQ(plan_file(on, r).predicted->clock_changes_per_step, r.chosen->sim.clock_changes);
}

TEST(PlanInTime, EveryRungHasFewerChangesAndLongerPhases) {
  const PlanJobResult r = plan_trace(options(true), blocks_trace(40, 4));
  ASSERT_TRUE(r.in_time.checked);
  for (std::size_t i = 1; i < r.in_time.rungs.size(); ++i) {
    const InTimeRung& a = r.in_time.rungs[i - 1];
    const InTimeRung& b = r.in_time.rungs[i];
    EXPECT_LT(b.plan->sim.clock_changes, a.plan->sim.clock_changes);
    EXPECT_GT(b.min_phase_ns, a.min_phase_ns);
    if (!std::isinf(b.min_phase_ns)) {
      EXPECT_GE(b.plan->shortest_phase_ns, b.min_phase_ns * (1 - 1e-9));
      EXPECT_DOUBLE_EQ(b.plan->switch_latency_ns, 6e6);  // issued L ahead, as the runtime will
    }
  }
  // Every rung but the last was replayed and missed the target.
  for (std::size_t i = 0; i + 1 < r.in_time.rungs.size(); ++i) {
    ASSERT_TRUE(r.in_time.rungs[i].in_time);
    EXPECT_LT(*r.in_time.rungs[i].in_time, kPlanMinInTime);
  }
}

TEST(PlanInTime, TooFewStepsOrNoChangeSkipIt) {
  const PlanJobResult r = plan_trace(options(true), blocks_trace(20, 0));
  std::vector<InTimeRung> ladder(1);
  ladder[0].plan = r.chosen;
  trace::IterationAnalysis one = r.iterations;
  one.iterations.resize(1);
  auto cp = [&](const sim::StrategyResult&) { return runtime::clock_plan_from(plan_file(options(true), r)); };
  const InTimeCheck c = check_in_time(r.trace, one, ladder, cp, 6e6);
  EXPECT_FALSE(c.checked);
  EXPECT_NE(c.skipped.find("fewer than two steps"), std::string::npos);
  EXPECT_NE(c.summary().find("skipped"), std::string::npos);
  EXPECT_FALSE(check_in_time(r.trace, r.iterations, {}, cp, 6e6).checked);
}

TEST(PlanInTime, ReplayOfTheFirstStepsOnly) {
  const PlanJobOptions o = options(false);
  const PlanJobResult r = plan_trace(o, blocks_trace(20, 0));
  runtime::ReplayOptions ro;
  ro.scheduler.switch_latency_ns = ro.scheduler.min_interval_ns = 6e6;
  const runtime::ClockPlan cp = runtime::clock_plan_from(plan_file(o, r));
  const auto all = runtime::replay(r.trace, cp, ro);
  ro.max_steps = 5;
  const auto five = runtime::replay(r.trace, cp, ro);
  EXPECT_EQ(all.launches, 20u * 244u);
  EXPECT_EQ(five.launches, 5u * 244u);
  EXPECT_LE(five.steps, 5u);
  EXPECT_FALSE(five.boundary_error_ns.empty());  // every completion reported: each change's boundary is timed
}

}  // namespace
}  // namespace gearshift::service
