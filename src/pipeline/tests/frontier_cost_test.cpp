#include <gtest/gtest.h>

#include "pipeline/frontier_cost.hpp"

using namespace gearshift::pipeline;

namespace {
// Two stages; forward 2..4 ms, backward 4..7 ms over three clocks (1 ms grid: q 2..4 and 4..7).
const char* kProfile =
    "stage,instruction,frequency,time,energy\n"
    "0,forward,1400,0.002,10\n0,forward,1200,0.003,8\n0,forward,1000,0.004,7\n"
    "0,backward,1400,0.004,20\n0,backward,1200,0.0055,16\n0,backward,1000,0.007,14\n"
    "1,forward,1400,0.002,10\n1,forward,1200,0.003,8\n1,forward,1000,0.004,7\n"
    "1,backward,1400,0.004,20\n1,backward,1200,0.0055,16\n1,backward,1000,0.007,14\n";

PipelineProblem problem(int M) {
  PipelineProblem p;
  p.schedule = PipelineSchedule::k1F1B;
  p.stages = 2;
  p.microbatches = M;
  p.model = {1e-3, 10, CostModelKind::kHull};
  return p;
}
}  // namespace

// Below the limit the estimate counts the frontier's exact span T_max − T_min (the solver's step bound).
TEST(FrontierCost, CountsInstructionsAndTheFrontierSpan) {
  const Profile prof = parse_profile(kProfile, "two stages");
  const auto c = estimate_frontier_cost(prof, problem(6), 1e9);
  EXPECT_FALSE(c.bound);
  EXPECT_EQ(c.instructions, 24);
  const auto plan = plan_pipeline(prof, problem(6));
  EXPECT_EQ(c.steps, plan.frontier.points.front().T - plan.frontier.points.back().T);
  EXPECT_GE(c.steps, static_cast<long long>(plan.frontier.points.size()) - 1);
  EXPECT_DOUBLE_EQ(c.seconds(), kFrontierSecondsPerInstructionStep * 24 * static_cast<double>(c.steps));
}

// Over the limit the lower bound is returned without the DAG; it never exceeds the exact span.
TEST(FrontierCost, ALowerBoundRefusesHugeJobsWithoutBuildingThem) {
  const Profile prof = parse_profile(kProfile, "two stages");
  const auto exact = estimate_frontier_cost(prof, problem(6), 1e9);
  const auto bound = estimate_frontier_cost(prof, problem(6), 0);
  EXPECT_TRUE(bound.bound);
  EXPECT_GT(bound.steps, 0);
  EXPECT_LE(bound.steps, exact.steps);
  // 2^20 microbatches: 4M instructions; the bound alone (every rank: 2^20 x (2 + 4) units of work, the fastest
  // op 4 units long, every op 2 units slower at its slowest) is 2^20 x 6 / 4 x 2 steps.
  const auto huge = estimate_frontier_cost(prof, problem(1 << 20), 60);
  EXPECT_TRUE(huge.bound);
  EXPECT_EQ(huge.instructions, 4LL << 20);
  EXPECT_EQ(huge.steps, (6LL << 20) / 4 * 2);
  EXPECT_GT(huge.seconds(), 60);
}
