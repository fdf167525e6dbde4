#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "pipeline/dag.hpp"
#include "pipeline/frontier.hpp"
#include "pipeline/report.hpp"

using namespace gearshift::pipeline;

namespace {
CostTable linear(int q_min, int q_max, double fast_j, double slope_j) {
  CostTable t;
  t.q_min = q_min;
  for (int d = q_min; d <= q_max; ++d) t.cost.push_back(fast_j - slope_j * (d - q_min));
  return t;
}

// Random convex non-increasing costs: decreasing marginal savings.
CostTable random_convex(std::mt19937& rng, int q_min, int width) {
  std::uniform_real_distribution<double> u(0.1, 3.0);
  std::vector<double> steps(width);
  for (auto& s : steps) s = u(rng);
  std::sort(steps.begin(), steps.end(), std::greater<>());
  CostTable t;
  t.q_min = q_min;
  double c = 50;
  t.cost.push_back(c);
  for (double s : steps) t.cost.push_back(c -= s);
  return t;
}
}  // namespace

TEST(Frontier, TwoParallelChainsCrashTheCheaperFirst) {
  // a → b in series, c in parallel. a: 2..4 saves 3 J/unit, b: 3..4 saves 1 J/unit, c: 5..7 saves 2 J/unit.
  FrontierInput in;
  in.num_ops = 3;
  in.edges = {{0, 1}};
  in.costs = {linear(2, 4, 10, 3), linear(3, 4, 10, 1), linear(5, 7, 10, 2)};
  in.gpus = 2;
  in.unit_s = 0.5;
  in.blocking_power_w = 4;
  auto f = compute_frontier(in);
  ASSERT_EQ(f.points.size(), 4u);  // T = 8, 7, 6, 5
  EXPECT_EQ(f.points[0].T, 8);
  EXPECT_DOUBLE_EQ(f.points[0].compute_j, 4 + 9 + 6);
  EXPECT_DOUBLE_EQ(f.points[0].energy_j, 19 + 2 * 8 * 0.5 * 4);
  // T = 7: shorten b (1 J), T = 6: shorten a (3 J) and c (2 J), T = 5: a again (3 J) and c (2 J).
  EXPECT_DOUBLE_EQ(f.points[1].compute_j, 20);
  EXPECT_DOUBLE_EQ(f.points[2].compute_j, 25);
  EXPECT_DOUBLE_EQ(f.points[3].compute_j, 30);
  EXPECT_EQ(f.points[3].T, 5);
  EXPECT_EQ(f.durations_at(3), (std::vector<int>{2, 3, 5}));
}

TEST(Frontier, WarmAndBoostBkGiveIdenticalFrontiers) {
  std::mt19937 rng(7);
  auto g = build_dag(PipelineSchedule::k1F1B, 3, 5, 1, false);
  FrontierInput in;
  in.num_ops = static_cast<int>(g.ops.size());
  in.edges = g.edges;
  for (int i = 0; i < in.num_ops; ++i) in.costs.push_back(random_convex(rng, 4 + i % 3, 5));
  in.engine = CutEngine::kWarm;
  auto a = compute_frontier(in);
  in.engine = CutEngine::kBoostBk;
  auto b = compute_frontier(in);
  ASSERT_EQ(a.points.size(), b.points.size());
  for (std::size_t k = 0; k < a.points.size(); ++k) {
    EXPECT_EQ(a.points[k].T, b.points[k].T);
    EXPECT_DOUBLE_EQ(a.points[k].compute_j, b.points[k].compute_j);
    EXPECT_EQ(a.durations_at(k), b.durations_at(k));
  }
  EXPECT_GT(a.points.size(), 10u);
}

// Longest path by repeated relaxation, independent of the solver's critical-path code.
static int longest_path(const FrontierInput& in, const std::vector<int>& d) {
  std::vector<long> start(static_cast<std::size_t>(in.num_ops), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto [u, w] : in.edges)
      if (start[u] + d[u] > start[w]) {
        start[w] = start[u] + d[u];
        changed = true;
      }
  }
  long t = 0;
  for (int v = 0; v < in.num_ops; ++v) t = std::max(t, start[v] + d[v]);
  return static_cast<int>(t);
}

// Issue 48: the warm engine gives the network only the capacities of operations and edges whose state changed
// since the last step. Costs with long linear stretches and equal slopes (as the hull model makes) give many
// tied cuts, where a missed change would pick another cut. Every point, its compute energy and its changes must
// equal the from-scratch Boost engine's, and each point's durations must have the point's makespan.
TEST(Frontier, WarmEngineEqualsFromScratchCutsOnRandomPipelines) {
  std::mt19937 rng(48);
  int compared = 0;
  for (auto sch : {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B, PipelineSchedule::kInterleaved1F1B}) {
    for (int S = 2; S <= 4; ++S) {
      const int v = sch == PipelineSchedule::kInterleaved1F1B ? 2 : 1;
      const int M = sch == PipelineSchedule::kInterleaved1F1B ? 2 * S : S + 3;
      auto g = build_dag(sch, S, M, v, S == 3);
      FrontierInput in;
      in.num_ops = static_cast<int>(g.ops.size());
      in.edges = g.edges;
      in.gpus = S;
      in.blocking_power_w = 50;
      // One cost table per (rank, instruction), piecewise linear with slopes drawn from a few values.
      std::vector<CostTable> tables;
      std::uniform_int_distribution<int> q0(3, 6), seg(1, 4), pick(0, 2);
      std::uniform_real_distribution<double> base(30, 50);
      for (int k = 0; k < 3 * S; ++k) {
        CostTable t;
        t.q_min = q0(rng);
        double c = base(rng);
        t.cost.push_back(c);
        for (double slope : {3.0, 1.5, 0.5}) {
          if (pick(rng) == 0) continue;
          for (int i = seg(rng); i > 0; --i) t.cost.push_back(c -= slope);
        }
        tables.push_back(t);
      }
      for (const auto& o : g.ops) in.costs.push_back(tables[3 * o.rank + static_cast<int>(o.instruction)]);
      in.engine = CutEngine::kWarm;
      const auto a = compute_frontier(in);
      in.engine = CutEngine::kBoostBk;
      const auto b = compute_frontier(in);
      ASSERT_EQ(a.points.size(), b.points.size()) << schedule_name(sch) << " S=" << S;
      ASSERT_EQ(a.changes, b.changes) << schedule_name(sch) << " S=" << S;
      for (std::size_t k = 0; k < a.points.size(); ++k) {
        EXPECT_EQ(a.points[k].T, b.points[k].T);
        EXPECT_EQ(a.points[k].compute_j, b.points[k].compute_j);  // the same sums in the same order
        EXPECT_EQ(longest_path(in, a.durations_at(k)), a.points[k].T) << schedule_name(sch) << " S=" << S << " point " << k;
      }
      // The start's energy is summed in the caller's operation order (as before the solver renumbered them).
      double start = 0;
      for (int i = 0; i < in.num_ops; ++i) start += in.costs[i].at(in.costs[i].q_max());
      EXPECT_EQ(a.points[0].compute_j, start);
      compared += static_cast<int>(a.points.size());
    }
  }
  EXPECT_GT(compared, 200);
}

TEST(Frontier, CycleIsRejected) {
  FrontierInput in;
  in.num_ops = 2;
  in.edges = {{0, 1}, {1, 0}};
  in.costs = {linear(1, 2, 5, 1), linear(1, 2, 5, 1)};
  EXPECT_THROW(compute_frontier(in), std::runtime_error);
}

TEST(Report, FrontierCsvLayoutAndParetoFilter) {
  Frontier f;
  f.unit_s = 0.5;
  f.points = {{4, 0, 10}, {3, 0, 9}, {2, 0, 9.5}, {1, 0, 12}};
  EXPECT_EQ(frontier_csv(f, false), "time,energy\n1.5,9\n1,9.5\n0.5,12\n");
  f.points[1].energy_j = 9.5;  // equal to a faster row: dominated
  EXPECT_EQ(frontier_csv(f, true), "time,energy\n1,9.5\n0.5,12\n");
  f.points[0].energy_j = 8;  // the all-slowest start is listed when it is Pareto-optimal
  EXPECT_EQ(frontier_csv(f, true), "time,energy\n2,8\n1,9.5\n0.5,12\n");
}
