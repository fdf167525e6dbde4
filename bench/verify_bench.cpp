// verify_bench: what measured verification (src/verify) needs and costs, on simulated jobs (verify/sim_job.hpp):
// steps until its first verdict against step-time noise and budget, how often the plan is kept, and in steady state
// the share of steps run at the baseline clocks and the energy that costs as a share of the plan's saving.
// Run: build/bench/verify_bench   (about 10 s; output quoted in docs/verification.md)
#include <algorithm>
#include <cstdio>
#include <vector>

#include "verify/sim_job.hpp"

using namespace gearshift;
using namespace gearshift::verify;

namespace {

// The law-truth job of the closed-loop tests (verify/sim_job.hpp: a ~120 ms step), the model right, the plan at half
// the budget by the truth (so that a hold is what the truth allows), CV `cv` per step, 2 % drift.
LawJob make(double cv, double budget) { return make_law_job({1, 2, cv, budget / 2}); }

}  // namespace

int main() {
  constexpr int kSeeds = 40;
  constexpr std::uint64_t kSteps = 100'000;  // about 3.3 h of a ~120 ms step
  std::printf("Steps to the first verdict (median of %d seeds; plan at half the budget by the truth, ~120 ms step, "
              "blocks >= 5 steps and 2 s):\n",
              kSeeds);
  std::printf("%-10s", "CV \\ budget");
  const double budgets[] = {0.005, 0.01, 0.02, 0.05};
  const double cvs[] = {0.005, 0.01, 0.02, 0.05};
  for (double b : budgets) std::printf(" %16.1f %%", 100 * b);
  std::printf("\n");
  for (double cv : cvs) {
    std::printf("%6.1f %%   ", 100 * cv);
    for (double b : budgets) {
      const LawJob j = make(cv, b);
      ControllerOptions o;
      o.budget = b;
      std::vector<double> steps;
      int held = 0;
      for (int s = 0; s < kSeeds; ++s) {
        const ClosedLoopResult r = run_closed_loop(j.job, j.ladder, o, kSteps, 1 + static_cast<std::uint64_t>(s));
        steps.push_back(static_cast<double>(r.steps_to_verdict ? r.steps_to_verdict : kSteps));
        held += r.phase == Phase::held;
      }
      std::nth_element(steps.begin(), steps.begin() + kSeeds / 2, steps.end());
      std::printf(" %7.0f (%2d/%d held)", steps[kSeeds / 2], held, kSeeds);
    }
    std::printf("\n");
  }
  // A job's own cycle of slow steps (Megatron-LM's logging iteration every 10: +30 %, H200), CV 1 %, budget 1 %:
  // blocks of >= 5 steps hold 0 or 1 slow step, blocks of whole cycles exactly one.
  std::printf("\nA cycle of slow steps (every 10th step +30 %%; CV 1 %%, budget 1 %%; median of %d seeds):\n", kSeeds);
  for (const std::size_t max_cycle : {std::size_t{0}, std::size_t{32}}) {
    LawJobOptions lo{1, 2, 0.01, 0.005};
    lo.slow_every = 10;
    lo.slow_extra = 0.30;
    const LawJob j = make_law_job(lo);
    ControllerOptions o;
    o.budget = 0.01;
    o.max_cycle = max_cycle;
    std::vector<double> steps, width;
    int held = 0, found = 0;
    for (int s = 0; s < kSeeds; ++s) {
      const ClosedLoopResult r = run_closed_loop(j.job, j.ladder, o, kSteps, 1 + static_cast<std::uint64_t>(s));
      steps.push_back(static_cast<double>(r.steps_to_verdict ? r.steps_to_verdict : kSteps));
      held += r.phase == Phase::held;
      found += r.cycle == 10;
      if (r.phase == Phase::held) width.push_back(r.reported.slowdown.hi - r.reported.slowdown.lo);
    }
    std::nth_element(steps.begin(), steps.begin() + kSeeds / 2, steps.end());
    std::sort(width.begin(), width.end());
    std::printf("  %-34s first verdict after %6.0f steps, %2d/%d held, cycle of 10 found in %2d/%d, slowdown "
                "interval width (held) %.2f %%\n",
                max_cycle ? "blocks of whole cycles (default):" : "blocks of >= 5 steps and 2 s alone:", steps[kSeeds / 2],
                held, kSeeds, found, kSeeds, width.empty() ? 0.0 : 100 * width[width.size() / 2]);
  }
  // Steady state: one plan that holds, a long run; baseline steps as a share and their energy against the saving.
  const LawJob j = make(0.01, 0.02);
  ControllerOptions o;
  o.budget = 0.02;
  const ClosedLoopResult r = run_closed_loop(j.job, j.ladder, o, kSteps, 99);
  const auto base = j.ladder.clocks_at(0), plan = j.ladder.clocks_at(r.alpha);
  const double saving_per_step = j.job.step_j(base) - j.job.step_j(plan);
  const double ideal = saving_per_step * static_cast<double>(r.steps);
  const double got = r.baseline_energy_j - r.run_energy_j;
  std::printf("\nSteady state (CV 1 %%, budget 2 %%, %llu steps): phase %s; saving kept %.2f %% of the ideal "
              "(the plan at every step): verification cost %.2f %% of the saving, bound by design %.1f %% "
              "(2 baseline blocks in steady_gap_max + 4 = %zu blocks)\n",
              static_cast<unsigned long long>(r.steps), phase_name(r.phase), 100 * got / ideal, 100 * (1 - got / ideal),
              100.0 * 2 / static_cast<double>(o.steady_gap_max + 4), o.steady_gap_max + 4);
  return 0;
}
