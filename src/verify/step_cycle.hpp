// A job's own cycle of slow steps, so that verification blocks span whole cycles.
//
// Many training loops have a step that recurs every p steps and runs longer than the others: Megatron-LM's
// logging iteration every `--log-interval` (on an H200, blocks of 8 iterations held 0 or 1 of its slow
// iterations: one block's mean step 328 ms against 252-268 ms for the others, and the A/A interval was +-3 %
// after 10 quads, docs/verification.md). A block of any p consecutive steps holds exactly one step of each
// place in the cycle, so blocks of whole cycles carry none of that scatter.
//
// Found by a one-way analysis of variance of the step times grouped by step number modulo p (Fisher; any
// statistics text): eta^2(p) = SS_between / SS_total, the share of the steps' variance their place in a p-cycle
// explains. Each step is first taken relative to its block's mean step: blocks at the plan's and the baseline's
// clocks differ by the plan's slowdown, which is not the job's cycle. Pure noise gives eta^2 near (p - 1) / (n - 1); a cycle that explains at least kMinShare of it, over at
// least kMinCycles cycles of steps, is the job's (the smallest p within kNearBest of the best share: multiples of
// the cycle explain as much). Once found it is kept for the run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gearshift::verify {

class StepCycle {
 public:
  static constexpr double kMinShare = 0.5;    // eta^2 a cycle must reach
  static constexpr double kNearBest = 0.9;    // a shorter cycle within this share of the best is taken
  // Steps seen, at least, per step of the cycle: under pure noise eta^2 follows Beta((p-1)/2, (n-p)/2), whose mean
  // at n = 8p is about 1/8 with a standard deviation of 0.03-0.05 for p = 10-32: kMinShare lies 7 or more of those
  // above it, so looking every 8 steps over a long run finds no cycle in noise (at 4 cycles, 2-4 in 20 noise-only
  // runs of 512 steps did, StepCycle.NoCycleInNoiseOrInTheArms).
  static constexpr std::size_t kMinCycles = 8;
  static constexpr std::size_t kMinSteps = 40;  // and at all
  static constexpr std::size_t kWindow = 512;   // the latest steps looked at

  // `max_period`: the longest cycle looked for, steps (0 or 1: none; blocks are never cut at a cycle).
  explicit StepCycle(std::size_t max_period = 32) : max_period_(max_period) {}

  // Every step in order, settle and unmeasured ones included (a gap in the order would move the places), with
  // the block it ran in (the blocks' clocks). `step_s` > 0, s. Looks for a cycle every 8 steps (every 256 after
  // the first 1,024) until one is found.
  void add(double step_s, std::size_t block);
  // The cycle found, steps (0: none yet).
  std::size_t period() const { return period_; }
  // Whether a block of `steps` consecutive measured steps spans an even number of whole cycles (always, without
  // one): each of its halves then spans whole cycles too, which the estimate's batch means take from the halves
  // (estimate.hpp, ArmTotals::half_var_sum; a half holding the slow step and one without would read the cycle as
  // noise).
  bool whole(std::size_t steps) const { return period_ == 0 || steps % (2 * period_) == 0; }
  // Plain words for the run's summary: the cycle, its share and its slowest place ("" before one is found).
  const std::string& why() const { return why_; }

  // eta^2 of `steps` grouped by index modulo `p` (0 when they are all equal or fewer than p).
  static double share(const std::vector<double>& steps, std::size_t p);

 private:
  void look();
  std::size_t max_period_;
  std::vector<double> steps_;        // the latest kWindow steps' times, s
  std::vector<std::size_t> blocks_;  // and their blocks
  std::uint64_t seen_ = 0;     // steps added in all
  std::size_t period_ = 0;
  std::string why_;
};

}  // namespace gearshift::verify
