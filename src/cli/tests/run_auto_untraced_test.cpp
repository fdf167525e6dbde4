// `gearshift run --auto`, its second stage: the untraced step measured with recording off
// (service/auto_plan_untraced.cpp), the template re-timed or refused by it, and the calibration to the power the
// energy counter measured over it.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "auto_env.hpp"
#include "sim_run.hpp"

namespace {

namespace fs = std::filesystem;
using namespace gearshift::test;

// A launch-bound job slowed by the recording of every kernel (0.2 ms more per kernel: a ~75 ms traced step, ~52
// ms untraced): the plan is made for the untraced step, the template's idle time re-timed to it.
TEST(RunAuto, PlansForTheUntracedStepWhenRecordingSlowedTheWarmUp) {
 for (const bool launch_bound : {false, true}) {
  SCOPED_TRACE(launch_bound ? "each kernel launched as it starts" : "a step's kernels launched at its start");
  AutoEnv s;
  const fs::path out = s.t.dir / "out.txt", made = s.t.dir / "auto-plan.json";
  s.env.push_back("FAKE_JOB_TRACED_GAP_US=200");
  // Launch-bound: the dependency-driven simulator starts each kernel after its launch, so the launches must be
  // re-timed with the idle time too.
  if (launch_bound) s.env.push_back("FAKE_JOB_LAUNCH_BOUND=1");
  ASSERT_EQ(run(auto_argv({"--max-slowdown", "5%", "--warmup-steps", "10", "--plan-output", made.string(),
                           "--dry-run-log", s.log.string()},
                          {"--synthetic", "120"}),
                s.env, out),
            0)
      << slurp(out);
  const std::string o = slurp(out);
  const double traced = number_after(o, "live check passed: modelled step ");
  EXPECT_NEAR(traced, 52.43 + 22.6, 2.0) << o;  // ms: 113 kernels x 0.2 ms more
  EXPECT_NEAR(number_after(o, "untraced step "), 52.43, 3.0) << o;  // a loaded 2-core machine slows the fake job by up to ~1.5 ms
  // Counted by the launches of the fake job's one loss kernel per step (runtime::step_anchor_name).
  EXPECT_NE(o.find(" launches of cross_entropy_loss_kernel, once in each traced step), traced template"), std::string::npos) << o;
  EXPECT_NE(o.find(": the template's idle time re-timed by 0."), std::string::npos) << o;
  EXPECT_NEAR(number_after(o, "re-timed template: modelled step "), 52.43, 3.0) << o;
  auto j = nlohmann::json::parse(slurp(made));
  EXPECT_NEAR(j["period_us"].get<double>(), 52430, 3000);  // the untraced step, not the traced one
  EXPECT_EQ(j["positions"].size(), 113u);
  EXPECT_NE(o.find("applying the plan from now on"), std::string::npos) << o;
  // The in-time guard's one pair, said before the plan runs; its outcome in the summary. A plan that is one pair
  // itself (a loaded machine jittered every rung of the in-time check below its target) has no guard.
  if (o.find("in-time guard: none: the plan is one clock pair for the whole step") != std::string::npos) {
    EXPECT_EQ(o.find("  in-time guard: "), std::string::npos) << o;  // no outcome in the summary
    continue;
  }
  EXPECT_NE(o.find("in-time guard: should less than 95 % of the sampled kernel time run at the plan's clocks over "
                   "10 steps, the rest of the run takes one clock pair for the whole step: SM "),
            std::string::npos)
      << o;
  const double sm = number_after(o, "one clock pair for the whole step: SM ");
  EXPECT_GE(sm, 345) << o;
  EXPECT_LE(sm, 1980) << o;
  EXPECT_TRUE(o.find("  in-time guard: held (") != std::string::npos ||
              o.find("  in-time guard: FELL BACK at step ") != std::string::npos)
      << o;
 }
}

// Recording slowed the step by ~9 % (40 µs more per kernel): the template is re-timed to the untraced step too.
// Before, a template up to 10 % longer was kept as traced: its tracing gaps went into the plan and into its
// calibration (H200, gradient checkpointing: 166.3 ms kept for a 155.3 ms step, its 688 W then unreachable).
TEST(RunAuto, ATemplateAFewPercentLongerThanTheUntracedStepIsReTimed) {
  AutoEnv s;
  s.env.push_back("FAKE_JOB_TRACED_GAP_US=40");
  ASSERT_EQ(s.run_synthetic("100"), 0) << slurp(s.out);
  const std::string o = slurp(s.out);
  EXPECT_NEAR(number_after(o, "live check passed: modelled step "), 52.43 + 4.52, 1.5) << o;
  EXPECT_NE(o.find(": the template's idle time re-timed by 0."), std::string::npos) << o;
  EXPECT_EQ(o.find("timing holds"), std::string::npos) << o;
  auto j = nlohmann::json::parse(slurp(s.made));
  // The untraced step as this run measured it (its last measurement): the fake job's 52.43 ms, which a loaded
  // 2-core machine stretches (53.94 ms seen in a loaded local run), and below the traced ~57 ms.
  const double untraced_ms = number_after(o.substr(o.rfind("untraced step ")), "untraced step ");
  EXPECT_GT(untraced_ms, 52.0) << o;
  EXPECT_LT(untraced_ms, 56.0) << o;
  EXPECT_NEAR(j["period_us"].get<double>() / 1e3, untraced_ms, 0.01 * untraced_ms) << o;  // re-timed to it
  // Calibrated to the untraced run's own power over its own step (400 W, read at the counter's ticks).
  expect_calibrated_to_the_counters_power(o);
}

// The job's own slow stretch right after recording stops (100 µs more per kernel, ~22 %, for the 45 steps the first
// untraced window spans): that window is longer than the traced step, which recording can only lengthen, so it is
// measured again, and the plan is made for the job's step, not the stretch. Before, the template was re-timed to
// the slow stretch (H200, gradient checkpointing: 172.3 ms for a 155 ms step, in-time 85 %). The bounds allow a
// loaded 2-core machine's slower fake job (the traced step up to ~2 ms longer).
TEST(RunAuto, AnUntracedStepLongerThanTheTracedOneIsMeasuredAgain) {
  AutoEnv s;
  s.env.push_back("FAKE_JOB_UNTRACED_SLOW=45:100");
  ASSERT_EQ(s.run_synthetic("140"), 0) << slurp(s.out);
  const std::string o = slurp(s.out);
  EXPECT_NE(o.find("which recording can only lengthen: the job slowed for a while after recording stopped; "
                   "measuring the untraced step again"),
            std::string::npos)
      << o;
  EXPECT_GT(number_after(o, "untraced step "), 52.43 * 1.1) << o;  // the first window: the slow stretch
  auto j = nlohmann::json::parse(slurp(s.made));
  // The job's step (52.4 ms; up to ~3 ms more on a loaded machine: 55.4 ms seen), not the stretch's ~64 ms.
  EXPECT_GT(j["period_us"].get<double>(), 52430 - 3000);
  EXPECT_LT(j["period_us"].get<double>(), 58000);
}

// Kernels 1.5 times as long while recorded: the untraced step is shorter than the traced kernels alone, measured
// again over twice the steps, still so: the trace's times are not the job's and nothing is planned.
TEST(RunAuto, RefusesAStepWhoseKernelsAloneOutlastTheUntracedStep) {
  AutoEnv s;
  const fs::path out = s.t.dir / "out.txt";
  s.env.push_back("FAKE_JOB_TRACED_SCALE=1.5");
  EXPECT_EQ(run(auto_argv({"--max-slowdown", "5%", "--warmup-steps", "10", "--dry-run-log", s.log.string()},
                          {"--synthetic", "140"}),
                s.env, out),
            0);
  const std::string o = slurp(out);
  EXPECT_NE(o.find("ms its kernels alone were busy in the traced steps; measuring the untraced step again over 32 "
                   "steps"),
            std::string::npos)
      << o;
  EXPECT_NE(o.find("is shorter than the "), std::string::npos) << o;
  EXPECT_NE(o.find("the warm-up's kernel times are not the job's"), std::string::npos) << o;
  EXPECT_NE(o.find("continuing as a pass-through"), std::string::npos) << o;
  EXPECT_EQ(o.find("MODELLED saving"), std::string::npos) << o;
  EXPECT_EQ(slurp(s.log), "");
  // The summary says why nothing was followed: the process launched on the run's GPU (it said "none launched
  // kernels on GPU 0" of a job that launched 407,296 on it, H200 2026-12-03).
  EXPECT_NE(o.find("none followed: no plan was made (said above), each was told to turn its launch feed off, and the "
                   "job ran untouched"),
            std::string::npos)
      << o;
  EXPECT_EQ(o.find("none launched kernels on GPU"), std::string::npos) << o;
}

// Kernels 1.2 times as long while recorded (the synthetic step's 45.3 ms of kernels traced as 54.4 ms, its step
// 52.4 ms): the untraced step is a little shorter than the traced kernels alone. Measured again over twice the
// steps and still within the untraced measurement's 4 % of them, the job is planned as GPU-bound: the template's
// idle time removed, nothing to slow into. Before, it was refused (H100, Megatron-LM with 3 microbatches of
// accumulation: 944 ms measured for 947 ms of kernels, issue 50).
TEST(RunAuto, AnUntracedStepJustShortOfTheTracedKernelsIsMeasuredAgainThenPlannedGpuBound) {
  AutoEnv s;
  s.env.push_back("FAKE_JOB_TRACED_SCALE=1.2");
  ASSERT_EQ(s.run_synthetic("160"), 0) << slurp(s.out);
  const std::string o = slurp(s.out);
  EXPECT_NE(o.find("ms its kernels alone were busy in the traced steps; measuring the untraced step again over 32 "
                   "steps"),
            std::string::npos)
      << o;
  const double busy_ms = number_after(o, "shorter than the ");
  EXPECT_NEAR(busy_ms, 45.3 * 1.2, 1.5) << o;
  const double second_ms = number_after(o.substr(o.rfind("untraced step ")), "untraced step ");
  if (second_ms >= busy_ms)
    GTEST_SKIP() << "a loaded machine stretched the untraced step past the traced kernels: " << second_ms << " ms";
  EXPECT_NE(o.find("the job is planned as GPU-bound, its template's idle time removed"), std::string::npos) << o;
  EXPECT_NE(o.find("MODELLED saving"), std::string::npos) << o;
  auto j = nlohmann::json::parse(slurp(s.made));
  EXPECT_NEAR(j["period_us"].get<double>() / 1e3, busy_ms, 0.02 * busy_ms) << o;  // the kernels' busy time
}

TEST(RunAuto, CalibratesToTheUntracedRunsMeasuredPower) {
  AutoEnv s;
  const fs::path out = s.t.dir / "out.txt", made = s.t.dir / "auto-plan.json";
  ASSERT_EQ(run(auto_argv({"--max-slowdown", "5%", "--warmup-steps", "10", "--plan-output", made.string(),
                           "--dry-run-log", s.log.string()},
                          {"--synthetic", "110"}),
                s.env, out),
            0)
      << slurp(out);
  const std::string o = slurp(out);
  EXPECT_NE(o.find("W, from the NVML energy counter over "), std::string::npos) << o;
  EXPECT_NE(o.find(" s of the untraced run, read at two of its ticks: within "), std::string::npos) << o;
  auto j = nlohmann::json::parse(slurp(made));
  expect_calibrated_to_the_counters_power(o);
  EXPECT_NEAR(j["model"]["calibrated_to_power_w"].get<double>(), number_after(o, "model calibrated to the measured "),
              0.5);  // the line's figure, rounded to 1 W
  EXPECT_NE(o.find("MODELLED saving"), std::string::npos) << o;
}

// A template within the re-time tolerance of the untraced step keeps its traced step: it is calibrated to the
// untraced run's energy per step over that step (the measured 400 W x untraced / traced), not to its power
// (on an H200 a power-capped job's 688 W over its 155 ms untraced step could not be reached over its 166 ms
// template: refused, activity scale at its bound).
TEST(RunAuto, AKeptTemplateIsCalibratedToTheUntracedEnergyPerStep) {
  AutoEnv s;
  const fs::path out = s.t.dir / "out.txt";
  s.env.push_back("FAKE_JOB_TRACED_GAP_US=10");  // 113 kernels x 10 us: a traced step ~2 % longer, within the 4 %
  ASSERT_EQ(run(auto_argv({"--max-slowdown", "5%", "--warmup-steps", "10", "--dry-run-log", s.log.string()},
                          {"--synthetic", "110"}),
                s.env, out),
            0)
      << slurp(out);
  const std::string o = slurp(out);
  ASSERT_NE(o.find(": the warm-up's timing holds"), std::string::npos) << o;
  const double untraced = number_after(o, "untraced step "), traced = number_after(o, "traced template ");
  // The fake job's step is 52.43 ms, plus ~1.13 ms traced; a loaded 2-core machine stretches its sleeps (55.40 ms
  // traced once in a clean-clone CI run), so only the range is asserted: the calibration below is the point.
  EXPECT_GT(traced, 52.43) << o;
  EXPECT_LT(traced, 58.0) << o;
  // The counter's power over the window (400 W, read at its ticks), then spread over the template's step:
  // exactly that power x untraced / traced.
  const double measured = number_after(o, " % (", "of the untraced run, read at two of its ticks: within ");
  expect_calibrated_to_the_counters_power(o);
  EXPECT_NEAR(number_after(o, "model calibrated to the measured "), measured * untraced / traced, 1.0) << o;
  EXPECT_NE(o.find(" J per step over the template's "), std::string::npos) << o;
}

// Without an energy counter the model cannot be calibrated: nothing is planned (before, a MODELLED saving from the
// class priors' power was printed, "UNCALIBRATED", and applied; on the H200 such a saving was 3-4x the
// calibrated one).
TEST(RunAuto, RefusesToPlanWithoutAMeasuredPower) {
  AutoEnv s;
  s.env.push_back("GEARSHIFT_SIMGPU_FAULT=no-energy-counter");
  // 120 steps (6.3 s): with 80, a loaded machine (4 runs at once under TSan) ended the job while its untraced
  // step was measured, before the refusal could be said.
  ASSERT_EQ(s.run_synthetic("120", {"--apply"}), 0) << slurp(s.out);
  const std::string o = slurp(s.out);
  EXPECT_NE(o.find("live check passed"), std::string::npos) << o;
  EXPECT_NE(o.find("no measured power to calibrate the model to"), std::string::npos) << o;
  EXPECT_NE(o.find("continuing as a pass-through"), std::string::npos) << o;
  EXPECT_EQ(o.find("MODELLED saving"), std::string::npos) << o;
  for (const auto& l : s.clocklog()) EXPECT_EQ(l.find("set-sm"), std::string::npos) << l;
}

// Where the job keeps recording every kernel (--gpu-progress activity), its traced steps are its steps: the plan
// is calibrated to the energy counter's readings over them.
TEST(RunAuto, WithoutAnUntracedStepCalibratesToTheTracedStepsPower) {
  AutoEnv s;
  ASSERT_EQ(s.run_synthetic("100", {"--gpu-progress", "activity"}), 0) << slurp(s.out);
  const std::string o = slurp(s.out);
  EXPECT_EQ(o.find("untraced step "), std::string::npos) << o;
  // Read at the counter's ticks at every detection attempt, as the untraced window's edges are.
  EXPECT_NE(o.find(" s of the traced steps, read at two of its ticks: within "), std::string::npos) << o;
  expect_calibrated_to_the_counters_power(o);
  EXPECT_GT(number_after(o, "MODELLED saving "), 0) << o;
}

// The simulated GPU at its idle power while the fake job keeps it busy: no activity scale reproduces that, so
// nothing is planned, and the reason is said (before, the priors' power was planned with regardless).
TEST(RunAuto, RefusesAPowerTheModelCannotReproduce) {
  SimEnv s;
  const fs::path out = s.t.dir / "out.txt";
  EXPECT_EQ(run(auto_argv({"--max-slowdown", "5%", "--warmup-steps", "10", "--dry-run-log", s.log.string()},
                          {"--synthetic", "90"}),
                s.env, out),
            0);
  const std::string o = slurp(out);
  EXPECT_NE(o.find("no plan: the model cannot reproduce the measured power"), std::string::npos) << o;
  EXPECT_NE(o.find("from the NVML energy counter over "), std::string::npos) << o;
  EXPECT_NE(o.find("continuing as a pass-through"), std::string::npos) << o;
  EXPECT_EQ(o.find("MODELLED saving"), std::string::npos) << o;
  EXPECT_EQ(slurp(s.log), "");
}

}  // namespace
