#include "service/sync_slack.hpp"

#include <filesystem>

#include <gtest/gtest.h>

#include "gpu/spec.hpp"
#include "model/kernel_class.hpp"
#include "sim/collectives.hpp"
#include "trace/gearshift_format.hpp"

namespace gearshift::service {
namespace {

// A two-kernel step: a GEMM of `gemm_ms` then an all-reduce of `comm_ms` on its own stream.
RankInput synthetic(double gemm_ms, double comm_ms, double gap_ms) {
  model::DvfsModel m(gpu::find_spec("h200"));
  model::ClockPair def{m.spec().default_sm_clock_mhz, m.spec().default_mem_clock_mhz};
  model::Workload w;
  model::WorkloadOp g;
  g.name = "sm90_xmma_gemm";
  g.cls = model::KernelClass::gemm;
  g.coeffs = model::class_prior(g.cls);
  g.ref = def;
  g.ref_time_ns = gemm_ms * 1e6;
  model::WorkloadOp c = g;
  c.name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";
  c.cls = model::KernelClass::communication;
  c.coeffs = model::class_prior(c.cls);
  c.stream = 0;  // after the GEMM on its stream: the all-reduce waits for the gradients
  c.ref_time_ns = comm_ms * 1e6;
  c.gap_before_ns = gap_ms * 1e6;
  w.ops = {g, c};
  return RankInput{w, m, "synthetic", 0, 0, std::nullopt, {}};
}

TEST(SyncSlack, FastRankSlowsToTheStragglerAndTheJobDoesNotGrow) {
  // Rank 0: 30 ms of GEMM, 2 ms all-reduce. Rank 1: 20 ms of GEMM, then waits 10 ms inside the all-reduce.
  std::vector<RankInput> ranks{synthetic(30, 2, 0), synthetic(20, 12, 0)};
  SyncSlackOptions o;
  o.strategy = plan::Strategy::kernel_global;
  auto r = plan_sync_slack(ranks, o);
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_EQ(r.straggler, 0);
  EXPECT_NEAR(r.ranks[1].intrinsic_comm_time_ns * 1e-9, 0.002, 1e-12);  // the wait removed
  EXPECT_NEAR(r.ranks[1].comm_time_ns * 1e-9, 0.012, 1e-12);
  EXPECT_NEAR(r.deadline_ns, r.ranks[0].intrinsic_step_time_ns, 1e-3);
  // GEMM times are modelled at the power-capped clock, so only roughly the traced 32 ms and 22 ms.
  EXPECT_NEAR(r.ranks[1].straggler_factor, 32.0 / 22.0, 0.05);
  EXPECT_NEAR(r.ranks[1].traced_step_time_ns * 1e-9 - r.ranks[1].intrinsic_step_time_ns * 1e-9, 0.010, 1e-9);
  EXPECT_LE(r.job_step_time_after_ns, r.job_step_time_before_ns * (1 + 1e-9));
  EXPECT_GT(r.ranks[1].planned_step_time_ns, r.ranks[1].intrinsic_step_time_ns + 0.005);  // it used the slack
  EXPECT_GT(r.ranks[1].saving_pct, 10.0);
  EXPECT_LT(r.ranks[0].saving_pct, r.ranks[1].saving_pct);
}

// A rank's plan re-simulated in a reading of its power (plan-ranks' check of the other reading): in the rank's own
// reading it gives the plan's own figures, accounted as plan_sync_slack accounts them; with the GEMMs twice as
// active the same plan's figure moves with the reading (44.05 -> 23.79 %, the simulator's figures).
TEST(SyncSlack, ARanksPlanInAnotherReadingIsAccountedAsItsOwn) {
  std::vector<RankInput> ranks{synthetic(30, 2, 0), synthetic(20, 12, 0)};
  SyncSlackOptions o;
  o.strategy = plan::Strategy::kernel_global;
  const auto r = plan_sync_slack(ranks, o);
  for (std::size_t i = 0; i < 2; ++i) {
    const RankPlanInReading same = rank_plan_in_reading(ranks, r, i, ranks[i].workload, ranks[i].model);
    EXPECT_NEAR(same.saving_pct, r.ranks[i].saving_pct, 1e-9) << i;
    EXPECT_NEAR(same.planned_step_time_ns, r.ranks[i].planned_step_time_ns, 1e-3) << i;
  }
  model::Workload busier = ranks[1].workload;
  busier.ops[0].coeffs.activity *= 2;
  const RankPlanInReading other = rank_plan_in_reading(ranks, r, 1, busier, ranks[1].model);
  EXPECT_NEAR(r.ranks[1].saving_pct, 44.05, 0.01);
  EXPECT_NEAR(other.saving_pct, 23.79, 0.01);
}

// The same step with launch events (the GEMM launched 5 µs before it starts, the all-reduce early; 0.1 ms of CPU
// time before the next step): the dependency replay, and the ranks replayed together.
RankInput with_launches(double gemm_ms, double comm_ms) {
  RankInput r = synthetic(gemm_ms, comm_ms, 0);
  auto& ops = r.workload.ops;
  ops[0].start_offset_ns = 0, ops[0].launch_offset_ns = -5e3;
  ops[1].start_offset_ns = gemm_ms * 1e6, ops[1].launch_offset_ns = 0.2e6;
  for (auto& o : ops) o.launch_known = true;
  r.workload.period_ns = (gemm_ms + comm_ms + 0.1) * 1e6;
  return r;
}

TEST(SyncSlack, RanksWithLaunchEventsAreReplayedTogether) {
  std::vector<RankInput> ranks{with_launches(30, 2), with_launches(20, 12)};
  SyncSlackOptions o;
  o.strategy = plan::Strategy::kernel_global;
  auto r = plan_sync_slack(ranks, o);
  EXPECT_TRUE(r.collectives_replayed);
  EXPECT_EQ(r.straggler, 0);
  // Replayed together at default clocks, both ranks' all-reduce ends with rank 0's: the job's step is rank 0's.
  std::vector<sim::RankReplay> def;
  for (const auto& k : ranks) def.push_back({&k.workload, &k.model, sim::default_schedule(k.workload, k.model)});
  const sim::RanksResult together = sim::simulate_ranks(def, 0);
  EXPECT_NEAR(together.ranks[0].step_time_ns, together.ranks[1].step_time_ns, 1e-3);
  EXPECT_DOUBLE_EQ(r.job_step_time_before_ns, together.job_step_time_ns);
  // Rank 1 slows into its wait and the job does not grow.
  EXPECT_LE(r.job_step_time_after_ns, r.job_step_time_before_ns * (1 + 1e-9));
  EXPECT_GT(r.ranks[1].saving_pct, 10.0);
  // Without launch events (the fallback) the job's step is the ranks' own maximum, as before.
  auto f = plan_sync_slack({synthetic(30, 2, 0), synthetic(20, 12, 0)}, o);
  EXPECT_FALSE(f.collectives_replayed);
}

TEST(SyncSlack, RanksOfDifferentProgramsAreRefused) {
  auto a = synthetic(30, 2, 0), b = synthetic(20, 2, 0);
  b.workload.ops.pop_back();  // rank 1 without its all-reduce
  EXPECT_THROW(plan_sync_slack({a, b}), std::invalid_argument);
  EXPECT_THROW(plan_sync_slack({}), std::invalid_argument);
  SyncSlackOptions o;
  o.strategy = plan::Strategy::iteration;  // not a sync-slack strategy
  EXPECT_THROW(plan_sync_slack({a}, o), std::invalid_argument);
  o.strategy = plan::Strategy::phase;
  o.switch_latency_ns = -1e6;  // given and negative: refused, never read as "not given"
  EXPECT_THROW(plan_sync_slack({a}, o), std::invalid_argument);
}

// A rank's import and detection warnings reach its report, as `gearshift plan` prints them. Held the wrong value:
// none (a rank with a 415 ms stalled step among 109 ms ones was planned without a word).
TEST(SyncSlack, ARanksTraceAndStepWarningsAreItsWarnings) {
  const std::string path = std::string(GEARSHIFT_SHARED_DIR) + "/data/traces/ddp2_gpt2m_rank1_h200_trace.json.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no ../shared";
  trace::Trace t = trace::import_trace(path);
  t.health.warnings.push_back("12 events dropped");  // as the importer says it
  const RankInput in = rank_from_trace(std::move(t), "h200", path, false);
  ASSERT_FALSE(in.warnings.empty());
  EXPECT_EQ(in.warnings.front(), "12 events dropped");
}

// The check on the two traced DDP ranks (shared data): rank 1 waits for rank 0 at the all-reduce.
TEST(SyncSlack, Ddp2Gpt2mRankOneTakesRankZerosDeadline) {
  const std::string dir = std::string(GEARSHIFT_SHARED_DIR) + "/data/traces/";
  if (!std::filesystem::exists(dir + "ddp2_gpt2m_rank0_h200_trace.json.gz")) GTEST_SKIP() << "no ../shared";
  std::vector<RankInput> ranks{load_rank(dir + "ddp2_gpt2m_rank0_h200_trace.json.gz"),
                               load_rank(dir + "ddp2_gpt2m_rank1_h200_trace.json.gz")};
  // The model is calibrated to each rank's measured energy (61.3 J, 49.7 J at 0.0964 s).
  EXPECT_NEAR(ranks[0].measured_energy_j, 61.273, 1e-3);
  EXPECT_NEAR(ranks[1].measured_energy_j, 49.718, 1e-3);
  auto r = plan_sync_slack(ranks);
  EXPECT_EQ(r.straggler, 0);
  const auto& r0 = r.ranks[0];
  const auto& r1 = r.ranks[1];
  // Traced NCCL time per step ≈13.5 ms (rank 0) vs ≈52 ms (rank 1); the wait is rank 1's.
  EXPECT_NEAR(r0.comm_time_ns * 1e-9, 0.0135, 0.003);
  EXPECT_NEAR(r1.comm_time_ns * 1e-9, 0.052, 0.004);
  EXPECT_LT(r1.intrinsic_comm_time_ns * 1e-9, 0.5 * r1.comm_time_ns * 1e-9);
  EXPECT_GT(r1.straggler_factor, 1.03);  // only part of the 38 ms wait lies on rank 1's own critical path
  EXPECT_NEAR(r0.straggler_factor, 1.0, 1e-12);
  EXPECT_LE(r.job_step_time_after_ns, r.job_step_time_before_ns * (1 + 1e-9));
  EXPECT_GT(r1.saving_pct, 10.0);
  EXPECT_LT(r1.saving_pct, 30.0);
  EXPECT_GT(r1.planned_step_time_ns, r1.intrinsic_step_time_ns);  // it used the slack
  EXPECT_GT(r1.saving_pct, r0.saving_pct);
  RecordProperty("rank1_saving_pct", std::to_string(r1.saving_pct));
  std::printf(
      "ddp2: D=%.4f s; rank1 I=%.4f s -> %.4f s, %.2f J -> %.2f J (%.2f %%); rank0 %.2f %%; job %.4f -> %.4f s\n",
      r.deadline_ns * 1e-9, r1.intrinsic_step_time_ns * 1e-9, r1.planned_step_time_ns * 1e-9, r1.baseline_energy_j,
      r1.planned_energy_j, r1.saving_pct, r0.saving_pct, r.job_step_time_before_ns * 1e-9,
      r.job_step_time_after_ns * 1e-9);
}

}  // namespace
}  // namespace gearshift::service
