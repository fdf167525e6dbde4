// A profiler's delay is not slack (issue 46, service/cpu_side.hpp): the same steps recorded with a profiler's
// slower launches plan the same saving as without them, unless an untraced measurement says the job really waits.
#include <gtest/gtest.h>

#include <string>

#include "service/plan_job.hpp"
#include "service/sync_slack.hpp"
#include "service/tests/kernel_sequence.hpp"
#include "trace/record.hpp"

namespace gearshift::service {
namespace {

// Steps of 20 blocks, each a GEMM and nine elementwise kernels of 50 µs, then the fused AdamW update; the CPU
// launches every kernel `lead_ns` before it starts. `profiled_delay_ns` > 0: before each block's GEMM the GPU idles
// that long, the GEMM's launch arriving just ahead of it (a profiler's slower CPU side: the GPU waits for launches).
trace::Trace job(int steps, std::int64_t profiled_delay_ns) {
  trace::Trace t;
  t.names = {"nvjet_sm90_gemm_qkv", "vectorized_elementwise_kernel", "multi_tensor_apply_kernel<FusedAdamMathFunctor>"};
  testing::KernelSequence seq(t);
  for (int s = 0; s < steps; ++s) {
    for (int b = 0; b < 20; ++b) {
      seq.idle(profiled_delay_ns);
      seq.kernel(0, 50'000, 1'000, profiled_delay_ns > 0 ? 5'000 : 40'000);  // 1 µs dispatch gap after each
      for (int k = 0; k < 9; ++k) seq.kernel(1, 50'000, 1'000, 40'000);
    }
    for (int k = 0; k < 4; ++k) seq.kernel(2, 50'000, 1'000, 40'000);
  }
  return t;
}

PlanJobResult plan(trace::Trace t, const std::string& measured_by = "") {
  PlanJobOptions o;
  o.display_name = "synthetic";
  o.gpu = "h200";
  o.range_samples = 20;
  o.check_in_time = false;
  o.cpu_measured_by = measured_by;
  return plan_trace(o, std::move(t));
}

// Before: the profiled copy's 20 idle gaps of 200 µs per step were slack the kernels before them could fill at
// lower clocks, at no modelled step-time cost; the plan saved far more than the same steps recorded without them.
TEST(CpuSide, AProfilersLaunchDelaysAreNotSlack) {
  const PlanJobResult plain = plan(job(6, 0));
  const PlanJobResult profiled = plan(job(6, 200'000));
  ASSERT_FALSE(profiled.cpu.as_traced);
  EXPECT_EQ(profiled.cpu.reading, CpuSide::Reading::gpu_bound);
  // The profiled step replayed GPU-bound is the plain job's step.
  EXPECT_NEAR(profiled.cpu.traced_step_ns, plain.evaluation.baseline.step_time_ns + 20 * 200e3, 30e3);
  EXPECT_NEAR(profiled.evaluation.baseline.step_time_ns, plain.evaluation.baseline.step_time_ns, 10e3);
  // Within the plain plan's range and 0.5 points of its saving: what is left is the power limit's window, read from
  // the traced gaps (model::WorkloadOp::window_idle_share: GEMMs beside the profiler's gaps may draw more).
  EXPECT_NEAR(profiled.chosen->saving_pct, plain.chosen->saving_pct, 0.5);
  EXPECT_GE(profiled.chosen->saving_pct, plain.range.saving_low_pct);
  EXPECT_LE(profiled.chosen->saving_pct, plain.range.saving_high_pct);
  EXPECT_LE(profiled.chosen->slowdown_pct, 0.5);
  // What the delays would give, were they the job's, is said apart.
  ASSERT_TRUE(profiled.cpu.if_launch_bound);
  EXPECT_GT(profiled.cpu.if_launch_bound->saving_pct, plain.chosen->saving_pct + 3);
  const nlohmann::json j = report_json(PlanJobOptions{}, profiled).at("cpu_side");
  EXPECT_EQ(j.at("reading"), "gpu_bound");
  EXPECT_NEAR(j.at("if_launch_bound").at("saving_pct").get<double>(), profiled.cpu.if_launch_bound->saving_pct, 1e-12);
  EXPECT_NE(profiled.cpu.line().find("if the job is as launch-bound as traced"), std::string::npos);
}

// With an untraced measurement behind the CPU side, the launch-bound waits count: the figure is the one shown apart.
TEST(CpuSide, AnUntracedMeasurementLetsTheLaunchBoundWaitsCount) {
  const PlanJobResult profiled = plan(job(6, 200'000));
  const PlanJobResult measured = plan(job(6, 200'000), "the test's untraced step");
  EXPECT_TRUE(measured.cpu.as_traced);
  EXPECT_FALSE(measured.cpu.if_launch_bound);
  EXPECT_NEAR(measured.evaluation.baseline.step_time_ns, profiled.cpu.traced_step_ns, 1e-3);
  ASSERT_TRUE(profiled.cpu.if_launch_bound);
  EXPECT_NEAR(measured.chosen->saving_pct, profiled.cpu.if_launch_bound->saving_pct, 1e-9);
  EXPECT_EQ(report_json(PlanJobOptions{}, measured).at("cpu_side").at("reading"), "as_traced");
}

// What each saving rests on (sim/saving_parts.hpp): replayed GPU-bound the plan spends no launch-bound wait; the
// figure said apart (the CPU side as traced) rests mostly on the profiler's 20 waits a step; with an untraced
// measurement the plan is that figure and says so. The parts add up to each saving.
TEST(CpuSide, EachSavingSaysWhatItRestsOn) {
  const PlanJobResult profiled = plan(job(6, 200'000));
  const sim::SavingParts& p = profiled.saving_parts;
  EXPECT_NEAR(p.pct(p.saving_j), profiled.chosen->saving_pct, 1e-9);
  EXPECT_NEAR(p.busy_kernels_j + p.waits_total_j() + p.idle_j, p.saving_j, 1e-12);
  EXPECT_LT(p.pct(p.waits_j[static_cast<std::size_t>(graph::WaitKind::launch_bound)]), 0.05);
  ASSERT_TRUE(profiled.cpu.if_launch_bound_parts);
  const sim::SavingParts& q = *profiled.cpu.if_launch_bound_parts;
  EXPECT_NEAR(q.pct(q.saving_j), profiled.cpu.if_launch_bound->saving_pct, 1e-9);
  const double launch_bound = q.pct(q.waits_j[static_cast<std::size_t>(graph::WaitKind::launch_bound)]);
  // The 32 points it gains over the plan: 28.7 in the launch-bound waits, most of the rest the idle power in them.
  const double gain = profiled.cpu.if_launch_bound->saving_pct - p.pct(p.saving_j);
  EXPECT_GT(launch_bound, 0.8 * gain);
  EXPECT_NEAR(launch_bound + q.pct(q.idle_j) - p.pct(p.idle_j), gain, 0.1 * gain);
  const PlanJobResult measured = plan(job(6, 200'000), "the test's untraced step");
  EXPECT_NEAR(measured.saving_parts.waits_j[static_cast<std::size_t>(graph::WaitKind::launch_bound)],
              q.waits_j[static_cast<std::size_t>(graph::WaitKind::launch_bound)], 1e-12);
  const nlohmann::json j = report_json(PlanJobOptions{}, profiled);
  EXPECT_NEAR(j.at("saving_parts").at("busy_kernels_pct").get<double>() + j.at("saving_parts").at("waits_pct").get<double>() +
                  j.at("saving_parts").at("idle_power_pct").get<double>(),
              profiled.chosen->saving_pct, 1e-9);
  EXPECT_NEAR(j.at("cpu_side").at("if_launch_bound").at("saving_parts").at("waits_by_kind_pct").at("launch_bound").get<double>(),
              launch_bound, 1e-12);
}

// The profiler's own cost from its records (service::profiler_cost): 4,000 CPU ops over 2 steps of 100 ms, at
// 2.9-4.2 µs each, cost each traced step 5.8-8.4 ms; a trace stripped of its CPU ops says nothing.
TEST(CpuSide, TheProfilersCostIsEstimatedFromItsRecords) {
  trace::ProfilerRecords p;
  p.cpu_ops = 4000;
  p.runtime_calls = 1000;
  p.python_functions = 7;
  p.first_ns = 0;
  p.last_ns = 200'000'000;
  const auto c = profiler_cost(p, 100e6);
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->cpu_ops_per_step, 2000);
  EXPECT_DOUBLE_EQ(c->runtime_calls_per_step, 500);
  EXPECT_TRUE(c->stacks);
  EXPECT_FALSE(c->shapes);
  EXPECT_DOUBLE_EQ(c->low_ns, 2000 * kProfilerCostPerCpuOpLowNs);
  EXPECT_DOUBLE_EQ(c->high_ns, 2000 * kProfilerCostPerCpuOpHighNs);
  EXPECT_NEAR(c->low_ns, 5.8e6, 1);
  const std::string l = c->line(100e6, 80e6);
  EXPECT_NE(l.find("about 2000 CPU ops and 500 runtime calls per step, with stacks"), std::string::npos) << l;
  EXPECT_NE(l.find("5.8-8.4 ms"), std::string::npos) << l;
  EXPECT_NE(l.find("20.00 ms shorter"), std::string::npos) << l;
  p.cpu_ops = 6;  // 3 a step: the step annotations only
  EXPECT_FALSE(profiler_cost(p, 100e6));
  EXPECT_FALSE(profiler_cost(trace::ProfilerRecords{}, 100e6));
}

// A trace of gearshift's own tracer: its measured cost per call (3 µs) is taken out of each of the step's 204
// launches, not the whole CPU side; the CPU, 4 ms behind the GPU per step, still bounds the step.
TEST(CpuSide, GearshiftsOwnTraceLosesOnlyTheTracersCost) {
  trace::Trace t = job(6, 200'000);
  t.format = "gearshift-trace v2";
  const PlanJobResult r = plan(std::move(t));
  EXPECT_EQ(r.cpu.reading, CpuSide::Reading::tracer_cost_out);
  EXPECT_NEAR(r.cpu.traced_step_ns - r.cpu.replayed_step_ns, 204 * kGearshiftTracerCostPerCallNs, 1e3);
  EXPECT_NE(r.cpu.evidence.find("gearshift's tracer adds up to 3 µs"), std::string::npos) << r.cpu.evidence;
}

}  // namespace
}  // namespace gearshift::service

namespace gearshift::service {
namespace {

// plan-ranks takes each rank's CPU side as plan does: a profiled rank without a measured step is replayed GPU-bound
// and its warnings say so (before, its launch waits were slack the straggler plan could spend).
TEST(CpuSide, APlanRanksRankIsReadAsPlanReadsIt) {
  const RankInput r = rank_from_trace(job(6, 200'000), "h200", "rank0", /*calibrate=*/false);
  EXPECT_EQ(r.workload.cpu_time_scale, 0);
  bool said = false;
  for (const auto& w : r.warnings) said |= w.starts_with("CPU side: no untraced step measured");
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace gearshift::service
