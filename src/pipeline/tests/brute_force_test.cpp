// The frontier equals exhaustive search over every combination of integer durations, on small DAGs, with both
// cost models built from synthetic profiles.
#include <cmath>
#include <limits>
#include <random>

#include <fmt/core.h>
#include <gtest/gtest.h>

#include "pipeline/planner.hpp"

using namespace gearshift::pipeline;

namespace {

// min Σ f_i(d_i) over every duration vector, for each makespan bound.
std::vector<double> brute_force(const FrontierInput& in, int t_max) {
  std::vector<double> best(static_cast<std::size_t>(t_max) + 1, std::numeric_limits<double>::infinity());
  std::vector<int> d(in.num_ops);
  for (int i = 0; i < in.num_ops; ++i) d[i] = in.costs[i].q_min;
  while (true) {
    int T = makespan(in, d);
    double c = 0;
    for (int i = 0; i < in.num_ops; ++i) c += in.costs[i].at(d[i]);
    best[T] = std::min(best[T], c);
    int i = 0;
    while (i < in.num_ops && d[i] == in.costs[i].q_max()) {
      d[i] = in.costs[i].q_min;
      ++i;
    }
    if (i == in.num_ops) break;
    ++d[i];
  }
  for (int T = 1; T <= t_max; ++T) best[T] = std::min(best[T], best[T - 1]);
  return best;
}

// A synthetic profile: each (stage, instruction) gets clocks whose times span a few units with convex-ish energy.
std::string synthetic_profile(int stages, unsigned seed, bool recompute, int clocks) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(0.0, 0.4);
  std::string s = "stage,instruction,frequency,time,energy\n";
  for (int st = 0; st < stages; ++st) {
    for (const char* ins : {"forward", "backward", "recompute"}) {
      if (std::string(ins) == "recompute" && !recompute) continue;
      double base = std::string(ins) == "backward" ? 4.2 : 2.2;
      base += 0.5 * st;
      for (int k = 0; k < clocks; ++k) {
        double t = (base + (clocks > 2 ? 0.9 : 0.6) * k + jitter(rng) * 0.2) * 1e-3;
        double e = 20.0 / (1 + k) + jitter(rng);
        s += fmt::format("{},{},{},{},{}\n", st, ins, 1400 - 100 * k, t, e);
      }
    }
  }
  return s;
}

void check(PipelineSchedule sch, int S, int M, int v, bool recompute, CostModelKind kind, unsigned seed, int clocks = 4) {
  auto profile = parse_profile(synthetic_profile(S, seed, recompute, clocks), "synthetic");
  PipelineProblem p;
  p.schedule = sch;
  p.stages = S;
  p.microbatches = M;
  p.chunks = v;
  p.model = {1e-3, 30.0, kind};
  auto plan = plan_pipeline(profile, p);
  auto in = frontier_input(plan.dag, plan.models);
  const auto& fr = plan.frontier;
  ASSERT_GE(fr.points.size(), 3u);
  double combos = 1;
  for (const auto& c : in.costs) combos *= static_cast<double>(c.cost.size());
  ASSERT_LE(combos, 3e5) << "keep the exhaustive search small";
  auto best = brute_force(in, fr.points.front().T);
  // Fastest possible makespan: all at q_min.
  std::vector<int> fast;
  for (const auto& c : in.costs) fast.push_back(c.q_min);
  EXPECT_EQ(fr.points.back().T, makespan(in, fast));
  for (std::size_t k = 0; k < fr.points.size(); ++k) {
    const auto& pt = fr.points[k];
    if (k > 0) {
      EXPECT_EQ(pt.T, fr.points[k - 1].T - 1);
    }
    EXPECT_EQ(makespan(in, fr.durations_at(k)), pt.T);
    // Cut capacities are whole µJ, so a tie may be broken by up to a few µJ.
    EXPECT_NEAR(pt.compute_j, best[pt.T], 1e-5) << "T=" << pt.T;
    EXPECT_NEAR(pt.energy_j, pt.compute_j + S * pt.T * 1e-3 * 30.0, 1e-9);
  }
}

}  // namespace

TEST(BruteForce, OneFOneBHull) { check(PipelineSchedule::k1F1B, 2, 2, 1, false, CostModelKind::kHull, 1); }
TEST(BruteForce, OneFOneBExpFit) { check(PipelineSchedule::k1F1B, 2, 2, 1, false, CostModelKind::kExpFit, 2); }
TEST(BruteForce, GPipeHull) { check(PipelineSchedule::kGPipe, 2, 2, 1, false, CostModelKind::kHull, 3); }
TEST(BruteForce, GPipeExpFit) { check(PipelineSchedule::kGPipe, 2, 2, 1, false, CostModelKind::kExpFit, 4); }
TEST(BruteForce, ThreeStagesOneMicrobatchBothModels) {
  check(PipelineSchedule::k1F1B, 3, 1, 1, false, CostModelKind::kHull, 5);
  check(PipelineSchedule::k1F1B, 3, 1, 1, false, CostModelKind::kExpFit, 6);
}
TEST(BruteForce, RecomputeHull) { check(PipelineSchedule::k1F1B, 1, 2, 1, true, CostModelKind::kHull, 7); }
TEST(BruteForce, InterleavedExpFit) { check(PipelineSchedule::kInterleaved1F1B, 2, 2, 2, false, CostModelKind::kExpFit, 8, 2); }
