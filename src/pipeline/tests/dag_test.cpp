#include <string>

#include <gtest/gtest.h>

#include "pipeline/dag.hpp"
#include "pipeline/error.hpp"
#include "pipeline/frontier.hpp"

using namespace gearshift::pipeline;

namespace {
std::string order_of(const PipelineDag& g, int rank) {
  std::string s;
  for (int op : g.rank_order[rank]) {
    const auto& o = g.ops[op];
    if (!s.empty()) s.push_back(' ');
    s.push_back(o.instruction == Instruction::kForward ? 'F' : o.instruction == Instruction::kBackward ? 'B' : 'R');
    s.append(std::to_string(o.microbatch));
  }
  return s;
}

int unit_makespan(const PipelineDag& g) {
  FrontierInput in;
  in.num_ops = static_cast<int>(g.ops.size());
  in.edges = g.edges;
  return makespan(in, std::vector<int>(g.ops.size(), 1));
}
}  // namespace

TEST(Dag, OneFOneBOrderMatchesReadmeExample) {
  auto g = build_dag(PipelineSchedule::k1F1B, 4, 6, 1, false);
  EXPECT_EQ(order_of(g, 0), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(order_of(g, 3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  EXPECT_EQ(g.ops.size(), 48u);
}

TEST(Dag, GPipeOrderAndRecompute) {
  auto g = build_dag(PipelineSchedule::kGPipe, 2, 3, 1, true);
  EXPECT_EQ(order_of(g, 0), "F0 F1 F2 R2 B2 R1 B1 R0 B0");
  EXPECT_EQ(g.ops.size(), 18u);
}

TEST(Dag, UnitMakespansFollowTheBubbleFormula) {
  // With F = B = 1 unit per chunk, one iteration takes 2·(M·v + S − 1) units.
  EXPECT_EQ(unit_makespan(build_dag(PipelineSchedule::k1F1B, 4, 6, 1, false)), 2 * (6 + 4 - 1));
  EXPECT_EQ(unit_makespan(build_dag(PipelineSchedule::kGPipe, 4, 6, 1, false)), 2 * (6 + 4 - 1));
  EXPECT_EQ(unit_makespan(build_dag(PipelineSchedule::kInterleaved1F1B, 4, 8, 2, false)), 2 * (8 * 2 + 4 - 1));
  EXPECT_EQ(unit_makespan(build_dag(PipelineSchedule::kInterleaved1F1B, 2, 4, 3, false)), 2 * (4 * 3 + 2 - 1));
}

TEST(Dag, InterleavedRunsEveryChunkOfEveryMicrobatchOnce) {
  auto g = build_dag(PipelineSchedule::kInterleaved1F1B, 4, 8, 2, false);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(g.rank_order[r].size(), 2u * 8u * 2u);
  EXPECT_EQ(g.ops.size(), 4u * 8u * 2u * 2u);
}

TEST(Dag, BadParametersAreNamed) {
  EXPECT_THROW(build_dag(PipelineSchedule::kInterleaved1F1B, 4, 6, 2, false), PipelineError);
  EXPECT_THROW(build_dag(PipelineSchedule::k1F1B, 4, 6, 2, false), PipelineError);
  EXPECT_THROW(build_dag(PipelineSchedule::k1F1B, 0, 6, 1, false), PipelineError);
  try {
    parse_schedule("zigzag");
    FAIL();
  } catch (const PipelineError& e) {
    EXPECT_EQ(std::string(e.what()), "--schedule: unknown schedule 'zigzag' (gpipe, 1f1b, interleaved)");
  }
  EXPECT_EQ(parse_schedule("1f1b"), PipelineSchedule::k1F1B);
}
