// Perseus reference frontiers (shared data, README §4): level A with exp-fit, level B with hull. N = 12 here;
// all 8 files in bench/pipeline_reference_check (scripts/pipeline_reference_check.sh).
#include <filesystem>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "pipeline/planner.hpp"
#include "pipeline/reference.hpp"
#include "pipeline/report.hpp"

using namespace gearshift::pipeline;

namespace {
const std::string kBase = std::string(GEARSHIFT_SHARED_DIR) + "/data/perseus";

PipelinePlan plan_for(const std::string& model, int mb, CostModelKind kind) {
  PipelineProblem p;
  p.stages = 8;
  p.microbatches = mb;
  p.model = {1e-3, 83.64, kind};
  return plan_pipeline(read_profile(kBase + "/stage_profile/" + model + "+a100_sxm_bf16.csv"), p);
}
}  // namespace

class Reference : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kBase)) GTEST_SKIP() << "shared Perseus data not found at " << kBase;
  }
};

TEST_P(Reference, LevelAExpFitN12) {
  auto ref = read_curve_csv(fmt::format("{}/iteration_time_energy/a100_sxm/{}_bf16_mb12.csv", kBase, GetParam()));
  auto plan = plan_for(GetParam(), 12, CostModelKind::kExpFit);
  auto a = compare_level_a(frontier_rows(plan.frontier), ref, 1e-3);
  EXPECT_TRUE(a.first_matches);
  EXPECT_TRUE(a.last_matches);
  EXPECT_EQ(a.rows_ours, a.rows_ref);
  EXPECT_EQ(a.unmatched, 0u);
  EXPECT_LE(a.max_r, 1e-7);
}

TEST_P(Reference, LevelBHullN12) {
  auto ref = read_curve_csv(fmt::format("{}/iteration_time_energy/a100_sxm/{}_bf16_mb12.csv", kBase, GetParam()));
  auto plan = plan_for(GetParam(), 12, CostModelKind::kHull);
  auto b = compare_level_b(frontier_rows(plan.frontier), ref);
  EXPECT_EQ(b.uncovered, 0u);
  EXPECT_LE(b.max_r, 1e-3);
  EXPECT_LT(b.mean_r, 0.0);  // README §4: the hull is below the exponential fit on average
}

INSTANTIATE_TEST_SUITE_P(A100, Reference, ::testing::Values("bloom", "gpt3-175b"),
                         [](const auto& p) { return p.param == "bloom" ? std::string("bloom") : std::string("gpt3"); });

TEST(ReferenceEndPoints, BloomN12MatchesReadmeTable) {
  if (!std::filesystem::exists(kBase)) GTEST_SKIP() << "shared Perseus data not found at " << kBase;
  auto plan = plan_for("bloom", 12, CostModelKind::kExpFit);
  const auto& f = plan.frontier;
  EXPECT_EQ(f.points.front().T, 3437);
  EXPECT_EQ(f.points.back().T, 2797);
  EXPECT_NEAR(f.points.front().energy_j, 5475.427, 1e-3);  // E_slow
  EXPECT_NEAR(f.points.back().energy_j, 6558.773, 1e-3);   // ref last
  EXPECT_NEAR(all_fastest_compute_j(plan) + 8 * 2797 * 1e-3 * 83.64, 7302.891, 1e-3);  // E_fast
  const auto& m = plan.models.at(0, Instruction::kForward);
  EXPECT_EQ(m.kept().size(), 12u);
  EXPECT_EQ(m.q_min(), 51);
  EXPECT_EQ(m.q_max(), 63);
  EXPECT_NEAR(m.fit().b, -0.164848, 1e-6);
  auto s = summarise(plan, 1.2);
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_NEAR(s.rows[0].energy_j, 6558.773, 1e-3);
  EXPECT_NEAR(s.min_energy_j, 5434.623, 1e-3);
  EXPECT_NEAR(s.min_energy_time_s, 3.287, 1e-9);
  EXPECT_LE(s.rows[2].plan_time_s, 1.2 * 2.797 + 1e-9);
}
