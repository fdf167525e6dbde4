// The closed loop on simulated jobs whose truth the planner does not know (issue 45's check): (a) the measured
// per-kernel sweeps of a V100 (../shared/data/kernel_sweeps, SYnergy testing set) as the truth of a model fitted at
// two top clocks, (b) time twice as clock-sensitive as modelled, (c) power less clock-sensitive than modelled, (d) a
// model that is right; each at step-time noise CV 1 % and 5 % with a 2 % drift over the run, 40 seeds each.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include <gtest/gtest.h>

#include "model/kernel_sweeps.hpp"
#include "verify/sim_job.hpp"

namespace gearshift::verify {
namespace {

constexpr int kSeeds = 40;
constexpr std::uint64_t kSteps = 20'000;

struct Case {
  SimJob job;
  Ladder ladder;
  double budget;
};

// The law-truth job (verify/sim_job.hpp); `a_scale`, `gamma`: the truth against the model; the plan at the budget.
Case law_case(double a_scale, double gamma, double cv, double budget) {
  LawJob j = make_law_job({a_scale, gamma, cv, budget});
  return {std::move(j.job), std::move(j.ladder), budget};
}

// The first 24 real kernels of the SYnergy V100 testing set at their measured clocks; the model's sensitivity fitted
// from the top clock and the one nearest 80 % of it (the shape of a 3-clock calibration near the top).
std::optional<Case> sweep_case(double cv, double budget) {
  const std::string dir = std::string(GEARSHIFT_SHARED_DIR) + "/data/kernel_sweeps";
  if (!std::filesystem::exists(dir)) return std::nullopt;
  std::vector<model::KernelSweep> all = model::read_kernel_sweeps(dir);
  std::vector<TruthPosition> pos;
  std::vector<double> base_ns, model_a;
  std::vector<int> clocks;
  for (const auto& k : all) {
    if (k.dataset != "synergy" || k.suite != "real") continue;
    std::vector<model::Sample> s = model::at_memory_clock(k, k.samples.back().mem_mhz);
    if (s.size() < 20) continue;
    if (clocks.empty())
      for (const auto& x : s) clocks.push_back(x.sm_mhz);
    const model::Sample& top = s.back();
    const model::Sample& low = *std::min_element(s.begin(), s.end(), [&](const auto& x, const auto& y) {
      return std::abs(x.sm_mhz - 0.8 * top.sm_mhz) < std::abs(y.sm_mhz - 0.8 * top.sm_mhz);
    });
    TruthPosition p;
    p.sweep = s;
    p.base_ns = 2e6 + 1e6 * static_cast<double>(pos.size() % 5);
    p.base_w = top.energy_j / top.time_s;
    const double am = std::clamp((low.time_s / top.time_s - 1) / (static_cast<double>(top.sm_mhz) / low.sm_mhz - 1), 0.0, 1.0);
    pos.push_back(p);
    base_ns.push_back(p.base_ns);
    model_a.push_back(am);
    if (pos.size() == 24) break;
  }
  if (pos.size() < 24) return std::nullopt;
  std::sort(clocks.begin(), clocks.end());
  const model::ClockPair base{clocks.back(), 877};
  SimJobOptions so;
  so.gap_ns = 0.1 * std::accumulate(base_ns.begin(), base_ns.end(), 0.0);
  so.step_cv = cv;
  so.idle_w = 40;
  Ladder l;
  l.duration_ns = base_ns;
  l.baseline = base;
  l.sm_clocks_mhz = clocks;
  l.plan = plan_by_model(base_ns, model_a, base, clocks, so.gap_ns, budget);
  return Case{SimJob(pos, base, so), l, budget};
}

struct Outcome {
  int within = 0, costs = 0, covered = 0, coverable = 0, held = 0, baseline = 0;
  double kept = 0;  // mean share of the best-within-budget saving the truth allows
  double open_loop_slowdown = 0, open_loop_saving = 0, best_saving = 0;
  double mean_steps_to_verdict = 0;
};

Outcome run_case(const Case& c, const ControllerOptions& base_opt, const char* name) {
  ControllerOptions o = base_opt;
  o.budget = c.budget;
  Outcome out;
  const auto b0 = c.ladder.clocks_at(0);
  const double t0 = c.job.step_s(b0), e0 = c.job.step_j(b0);
  out.open_loop_slowdown = c.job.step_s(c.ladder.clocks_at(1)) / t0 - 1;
  out.open_loop_saving = 1 - c.job.step_j(c.ladder.clocks_at(1)) / e0;
  for (int k = 0; k <= 64; ++k) {  // the best the truth allows along the ladder within the budget
    const auto cl = c.ladder.clocks_at(k / 64.0);
    if (c.job.step_s(cl) / t0 - 1 <= c.budget) out.best_saving = std::max(out.best_saving, 1 - c.job.step_j(cl) / e0);
  }
  if (std::getenv("VERIFY_DEBUG_CURVE"))  // the truth along the ladder, to read a case by
    for (int k = 0; k <= 32; ++k) {
      const auto cl = c.ladder.clocks_at(k / 32.0);
      std::printf("  alpha %.3f shape %.4f slowdown %+.3f %% saving %.3f %%\n", k / 32.0, c.ladder.shape(k / 32.0),
                  100 * (c.job.step_s(cl) / t0 - 1), 100 * (1 - c.job.step_j(cl) / e0));
    }
  std::uint64_t verdict_steps = 0;
  for (int s = 0; s < kSeeds; ++s) {
    const ClosedLoopResult r = run_closed_loop(c.job, c.ladder, o, kSteps, 1000 + static_cast<std::uint64_t>(s));
    out.within += r.truth_slowdown <= c.budget + 1e-12;
    // Costs energy: ends on a rung that costs energy by the truth, or the whole run (its verification included)
    // used more than the baseline clocks would have (0.1 % tolerance: a plan must be run to be measured).
    out.costs += r.truth_saving < 0 || r.run_energy_j > r.baseline_energy_j * 1.001;
    if (std::getenv("VERIFY_DEBUG") && (r.truth_saving < 0 || r.run_energy_j > r.baseline_energy_j * 1.001))
      std::printf("  seed %d: phase %s alpha %.3f truth saving %.4f run/baseline energy %.5f\n", s, phase_name(r.phase),
                  r.alpha, r.truth_saving, r.run_energy_j / r.baseline_energy_j);
    out.held += r.phase == Phase::held;
    out.baseline += r.phase == Phase::baseline;
    if (r.phase != Phase::baseline && r.reported.quads >= 2) {
      ++out.coverable;
      out.covered += r.reported.slowdown.lo <= r.truth_slowdown && r.truth_slowdown <= r.reported.slowdown.hi;
    }
    out.kept += out.best_saving > 0 ? std::max(0.0, r.truth_saving) / out.best_saving : 1;
    verdict_steps += r.steps_to_verdict;
  }
  out.kept /= kSeeds;
  out.mean_steps_to_verdict = static_cast<double>(verdict_steps) / kSeeds;
  std::printf("%-28s open loop %+.2f %% time %+.2f %% energy; best within budget %.2f %%; within %d/%d, costs %d, "
              "held %d, baseline %d, covered %d/%d, kept %.0f %%, steps to verdict %.0f\n",
              name, 100 * out.open_loop_slowdown, -100 * out.open_loop_saving, 100 * out.best_saving, out.within,
              kSeeds, out.costs, out.held, out.baseline, out.covered, out.coverable, 100 * out.kept,
              out.mean_steps_to_verdict);
  return out;
}

void expect_safe(const Outcome& o) {
  EXPECT_GE(o.within, kSeeds * 95 / 100);  // ends within the budget by the truth in >= 95 % of runs
  EXPECT_EQ(o.costs, 0);                   // never costs energy
  if (o.coverable >= 10) {
    EXPECT_GE(o.covered, o.coverable * 9 / 10);
  }  // the interval covers the truth >= 90 %
}

class ClosedLoop : public ::testing::TestWithParam<double> {};

TEST_P(ClosedLoop, RightModelKeepsMostOfTheSaving) {
  const Outcome o = run_case(law_case(1, 2, GetParam(), 0.02), {}, "(d) right model");
  expect_safe(o);
  EXPECT_LE(o.open_loop_slowdown, 0.02 + 1e-9);
  EXPECT_GE(o.kept, 0.8);  // at CV 5 % too since rungs climb back from a conservative hold (78 % before)
}

TEST_P(ClosedLoop, TimeTwiceAsSensitiveBreaksTheOpenLoopNotTheClosedOne) {
  const Outcome o = run_case(law_case(2, 2, GetParam(), 0.02), {}, "(b) time 2x as sensitive");
  EXPECT_GT(o.open_loop_slowdown, 0.02 * 1.5);  // the open-loop plan breaks the budget, by the truth
  expect_safe(o);
  EXPECT_GT(o.held, 0);
}

TEST_P(ClosedLoop, PowerLessSensitiveNeverCostsEnergy) {
  const Outcome o = run_case(law_case(1, 0.3, GetParam(), 0.02), {}, "(c) power less sensitive");
  EXPECT_LT(o.open_loop_saving, 0.5 * run_case(law_case(1, 2, GetParam(), 0.02), {}, "  (d) for reference").open_loop_saving);
  expect_safe(o);
}

TEST_P(ClosedLoop, MeasuredV100SweepsAsTheTruth) {
  auto c = sweep_case(GetParam(), 0.02);
  if (!c) GTEST_SKIP() << "../shared/data/kernel_sweeps not found beside the checkout";
  const Outcome o = run_case(*c, {}, "(a) V100 sweeps");
  expect_safe(o);
  // Climbing from the back-off's conservative rung toward the knee keeps most of the best saving along the ladder
  // (45-48 % when the back-off was final).
  EXPECT_GE(o.kept, 0.8);
}

INSTANTIATE_TEST_SUITE_P(StepNoise, ClosedLoop, ::testing::Values(0.01, 0.05),
                         [](const auto& p) { return p.param <= 0.01 ? std::string("cv1") : std::string("cv5"); });

}  // namespace
}  // namespace gearshift::verify
