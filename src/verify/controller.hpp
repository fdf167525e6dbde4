// The closed loop that keeps the step-time budget as measured on the job: blocks of whole steps alternate between
// the plan (a rung of the ladder, ladder.hpp) and the baseline clocks in ABBA / BAAB quads; after each quad the
// estimate (estimate.hpp) decides:
//   - the saving's upper bound below zero: the plan costs energy, dropped for the baseline (final);
//   - the slowdown's lower bound above the budget: over the budget with confidence, back off;
//   - the slowdown's upper bound within the budget (and at least min_quads quads): the rung holds;
//   - max_quads quads and neither: the budget cannot be shown kept at this noise, back off;
// Backing off moves to the largest alpha whose step-time cost, by the job's clock sensitivity learnt from every
// quad so far (a regression of the quads' log-ratios on the ladder's clock shape, taken at its upper bound), is at
// most `margin` of the budget; after max_rungs rungs, or where that alpha is below 1/16, the baseline (final).
// A rung that holds below a rung that did not (backed off from, or undecided) and leaves room under the budget is
// climbed from: the next rung is read off the secant between the two rungs' measured slowdowns (its clock shape at
// margin x budget from the held rung's upper bound), at most max_climbs times. A climbed rung that breaks the
// budget, costs energy, cannot be decided or saves less than the rung below is left for the held one (final for
// climbing): the loop converges toward the best rung it measured within the budget, where one measured sensitivity
// through the origin is wrong whenever the job's slowdown is not linear in the clock shape (measured kernel sweeps:
// their time rises faster at low clocks, so the first back-off lands far under the budget).
// Once a rung holds, quads go on at a lower rate (gap plan-only blocks between quads, doubling up to
// steady_gap_max), so that a job whose behaviour changes is caught, and their baseline blocks cost a bounded share
// of the saving: at most 2 blocks in steady_gap_max + 4.
// Pure logic, no clock: the caller runs each block as next() says and reports it (service/verify_run.hpp live,
// the tests and bench/verify_bench.cpp in simulation). docs/verification.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "verify/estimate.hpp"
#include "verify/ladder.hpp"

namespace gearshift::verify {

// The confidence at which a rung's saving must be above zero for it to hold (controller.cpp).
inline constexpr double kSavingConfidence = 0.995;

enum class Arm { plan, baseline };
const char* arm_name(Arm a);

struct ControllerOptions {
  double budget = 0.005;              // step-time slowdown allowed, fraction (0.005 = 0.5 %)
  double confidence = 0.95;           // of the two-sided intervals the decisions use
  std::uint64_t block_steps = 5;      // whole steps measured per block, at least
  double block_seconds = 2.0;         // and at least this long, s (the caller sets >= 20 energy-counter periods)
  std::uint64_t settle_steps = 1;     // steps after a block's clocks were requested that are not measured
  std::size_t min_quads = 3;          // quads of a rung before it may hold
  std::size_t max_quads = 10;         // quads of a rung before it is backed off undecided
  std::size_t max_rungs = 4;          // rungs tried backing off (the plan included) before the baseline
  std::size_t max_climbs = 3;         // rungs tried climbing back toward the plan from a held one
  double margin = 0.8;                // a backed-off rung aims at this share of the budget
  std::size_t steady_gap_first = 4;   // plan-only blocks between quads once a rung holds, doubling ...
  std::size_t steady_gap_max = 32;    // ... up to this
  double stall_factor = 4;            // a step this many times its block's median step is a stall: block re-run
  // Blocks span whole cycles of the job's own slow steps once one is found (step_cycle.hpp), looked for up to this
  // many steps long (0: never; blocks end at block_steps and block_seconds alone).
  std::size_t max_cycle = 32;
  // false: measure only (a dry run, where both arms ran the same clocks): quads go on at the plan's rung and no
  // decision is made, since one from an A/A comparison would be about noise, not about the plan.
  bool decide = true;
};

// What the next block runs: the plan's rung `alpha` (Arm::plan) or the baseline clocks; `measured` false for the
// plan-only blocks between steady-state quads and once the baseline is final.
struct BlockPlan {
  Arm arm = Arm::plan;
  double alpha = 1;
  bool measured = true;
};

// A block as run: its measured steps' wall times (s, in order, after the settle steps) and the energy counter's
// window inside it (J and s; 0 s: no two counter ticks fell inside the block, or no counter).
struct BlockResult {
  std::vector<double> step_s;
  double joules = 0, energy_seconds = 0;
};

enum class Phase { verifying, held, baseline };
const char* phase_name(Phase p);

// Something the loop decided or noticed, for the run's summary and the verify log.
struct VerifyEvent {
  std::size_t block = 0;  // blocks run before it (the block that caused it is block - 1)
  // "hold", "back_off", "drop", "no_saving", "undecided", "stall", "no_tick", "recheck_over", "climb" (from a held
  // rung toward the plan), "climb_back" (the climbed rung left for the held one below it)
  std::string kind;
  double alpha_from = 1, alpha_to = 1;
  AbEstimate estimate;    // the rung's estimate when it was decided
  std::string why;        // plain words
};

// One rung as tried: its alpha and its quads, and how it ended ("" while current).
struct Rung {
  double alpha = 1;
  std::vector<Quad> quads;
  std::string outcome;
  std::size_t held_at = 0;  // quads when it held (0: not held)
  bool climbed = false;     // tried climbing from a held rung (climb_from_ is that rung)
};

class Controller {
 public:
  Controller(ControllerOptions o, Ladder ladder);

  BlockPlan next() const;
  // The block next() said was run, with what it measured. Returns the events it caused (possibly none).
  std::vector<VerifyEvent> finish_block(const BlockResult& r);

  Phase phase() const { return phase_; }
  double alpha() const { return rungs_[cur_].alpha; }  // the plan rung now (0 once the baseline is final)
  // Every rung tried, in the order tried (a rung returned to after a climb is not repeated: rung_index() says
  // which is current).
  const std::vector<Rung>& rungs() const { return rungs_; }
  std::size_t rung_index() const { return cur_; }
  // The current rung's estimate: over the quads since it held once they are min_quads (the quads that made it
  // hold were chosen by the decision, a lucky run among them: they bias the figure toward the budget), else over all.
  AbEstimate current() const;
  // The estimate the run's figures rest on: the current rung's, or once the baseline is final, that of the rung
  // the loop left for it (its last decision's); none before a quad.
  AbEstimate reported() const;
  const ControllerOptions& options() const { return o_; }
  const Ladder& ladder() const { return ladder_; }
  std::size_t blocks() const { return blocks_; }       // blocks finished (re-run ones included)
  // Steps measured in baseline blocks and in plan blocks (measured or not), over the run.
  std::uint64_t baseline_steps() const { return baseline_steps_; }
  std::uint64_t plan_steps() const { return plan_steps_; }
  // The job's clock sensitivity learnt so far (slowdown per unit of the ladder's shape) and its interval's upper
  // bound; 0 before any quad at a rung above the baseline.
  double sensitivity() const;
  double sensitivity_upper() const;
  const std::vector<VerifyEvent>& events() const { return events_; }

 private:
  double shape(double alpha) const;
  AbEstimate rung_estimate(const Rung& r) const;
  std::vector<std::pair<double, double>> shape_points() const;
  void quad_done(std::vector<VerifyEvent>& out);
  void back_off(std::vector<VerifyEvent>& out, const AbEstimate& e, const std::string& kind, const std::string& why);
  void to_baseline(std::vector<VerifyEvent>& out, const AbEstimate& e, const std::string& kind, const std::string& why);
  void maybe_climb(std::vector<VerifyEvent>& out, const AbEstimate& held);
  void climb_back(std::vector<VerifyEvent>& out, const AbEstimate& e, const std::string& why);

  ControllerOptions o_;
  Ladder ladder_;
  bool shape_from_clocks_ = true;  // the ladder's shape at alpha = 1 is > 0 (else alpha itself is the shape)
  Phase phase_ = Phase::verifying;
  std::vector<Rung> rungs_;
  std::size_t cur_ = 0;            // the current rung's index in rungs_
  std::size_t quad_pos_ = 0;       // block within the quad in progress, 0-3
  Quad quad_;                      // the quad in progress
  std::size_t steady_left_ = 0;    // plan-only blocks before the next quad (held)
  std::size_t steady_gap_ = 0;
  std::size_t blocks_ = 0;
  std::size_t climbs_ = 0;
  std::size_t climb_from_ = 0;     // while on a climbed rung: the index of the held rung it climbed from
  std::uint64_t baseline_steps_ = 0, plan_steps_ = 0;
  std::vector<VerifyEvent> events_;
};

}  // namespace gearshift::verify
