// A simulated training job whose truth the planner does not know, for testing and benchmarking the closed loop
// (controller.hpp) without a GPU: a step of positions whose time and board power at each clock follow a hidden
// truth (a per-position time law, or measured per-kernel sweeps interpolated between their clocks), with step-time
// noise and slow drift, and an energy counter that is read between ticks. run_closed_loop() drives a Controller
// through it block by block, as the live glue (service/verify_run.hpp) does on a real job.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "model/fit.hpp"
#include "verify/controller.hpp"

namespace gearshift::verify {

// One position's truth.
struct TruthPosition {
  double base_ns = 0;       // time at the baseline clocks, ns
  double base_w = 0;        // board power while it runs at the baseline clocks, W
  // Law truth (used when `sweep` is empty): t(f) = base·(a·f0/f + 1 - a); P(f) = idle + (base_w - idle)·(f/f0)^gamma.
  double a = 0.5, gamma = 2.0;
  // Sweep truth: measured (SM clock, time, energy) at one memory clock, ascending SM clock; time and power at f are
  // interpolated linearly between the measured clocks and scaled so that the baseline clock gives base_ns, base_w.
  std::vector<model::Sample> sweep;
};

struct SimJobOptions {
  double gap_ns = 0;           // clock-independent time per step (CPU work, waits), ns, at idle power
  double idle_w = 90;          // board power in the gap, W
  double step_cv = 0.01;       // per-step relative noise of the step time (normal)
  double drift = 0.02;         // step time drifts linearly by this share over the run
  double counter_period_s = 0.1;  // energy-counter tick period, s
  double tick_jitter_s = 0.004;   // how far a located tick's time may be off, s (uniform)
  // Every slow_every-th step of the run is slow_extra (a share) longer, at the step's power: a job's own cycle of
  // slow steps (Megatron-LM's logging iteration). 0: none.
  std::uint64_t slow_every = 0;
  double slow_extra = 0;
};

class SimJob {
 public:
  SimJob(std::vector<TruthPosition> positions, model::ClockPair baseline, SimJobOptions o);
  // The truth's noise-free step time (s) and energy per step (J) at per-position clocks.
  double step_s(const std::vector<model::ClockPair>& clocks) const;
  double step_j(const std::vector<model::ClockPair>& clocks) const;
  const std::vector<TruthPosition>& positions() const { return pos_; }
  const SimJobOptions& options() const { return o_; }

 private:
  friend struct ClosedLoopRun;
  double pos_time(std::size_t i, int sm) const;   // ns
  double pos_power(std::size_t i, int sm) const;  // W
  std::vector<TruthPosition> pos_;
  model::ClockPair base_;
  SimJobOptions o_;
};

// What one closed-loop run ended with, against the truth.
struct ClosedLoopResult {
  Phase phase = Phase::verifying;
  double alpha = 1;               // the rung the run ended on (0: baseline)
  double truth_slowdown = 0;      // of that rung, fraction
  double truth_saving = 0;        // of that rung, energy per step, fraction
  AbEstimate reported;            // the controller's estimate of that rung at the end (no quads at the baseline)
  double run_energy_j = 0;        // truth energy of every step the run ran (noise-free per step)
  double baseline_energy_j = 0;   // the same steps all at the baseline clocks
  std::uint64_t steps = 0;        // steps run
  std::uint64_t steps_to_verdict = 0;  // steps until the first hold or the baseline (0: none)
  std::size_t cycle = 0;               // the job's cycle of slow steps the blocks spanned (0: none found)
  std::size_t events = 0;
};

// Runs `steps` steps of `job` under a Controller made of `o` and `ladder` (seeded noise). Blocks as the live glue
// runs them: settle steps, then measured steps until block_steps and block_seconds, and whole cycles of the job's
// slow steps once one is found (step_cycle.hpp); the energy of a block is the
// counter's between the first and last tick inside its measured steps.
ClosedLoopResult run_closed_loop(const SimJob& job, const Ladder& ladder, const ControllerOptions& o,
                                 std::uint64_t steps, std::uint64_t seed);

// A plan as a simple planner with a *modelled* per-position sensitivity `model_a` would make it: positions in
// ascending model_a get the lowest supported SM clock whose modelled added time keeps the step's within `budget`
// (the budget's share of the step, summed). Memory clocks stay at the baseline. The step's modelled time includes
// `gap_ns`.
std::vector<model::ClockPair> plan_by_model(const std::vector<double>& base_ns, const std::vector<double>& model_a,
                                            model::ClockPair baseline, const std::vector<int>& sm_clocks_mhz,
                                            double gap_ns, double budget);

// The law-truth job of the closed-loop tests and bench/verify_bench: 24 positions of 1-8 ms (seeded draws), a
// modelled sensitivity in [0.1, 0.9] each, board power 250-650 W, a clock-independent gap of 10 % of the kernels'
// time; the truth's sensitivity is a_scale times the model's (at most 1) with power exponent `gamma`; the plan is
// plan_by_model at `plan_budget` on H100/H200 SM clocks (345-1980 MHz, every 15).
struct LawJobOptions {
  double a_scale = 1, gamma = 2, step_cv = 0.01, plan_budget = 0.02;
  std::uint64_t slow_every = 0;  // SimJobOptions::slow_every, slow_extra
  double slow_extra = 0;
};
struct LawJob {
  SimJob job;
  Ladder ladder;
};
LawJob make_law_job(const LawJobOptions& o);

}  // namespace gearshift::verify
