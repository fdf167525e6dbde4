// RuntimeCore::complete_steps: the steps a job ran whole, which `gearshift run` reports and reads J per step at.
// An evaluation's forward passes start like a training step and stop short of its end; they were counted as steps
// (steps(): every step a placed launch touched), and J per step was spread over them.
#include "runtime/runtime_core.hpp"

#include <string>

#include <gtest/gtest.h>

namespace gearshift::runtime {
namespace {

constexpr int kKernels = 20;  // a step of 20 kernels, k0 ... k19; the forward pass is the first 8

std::string name(int i) {
  std::string n(1, 'k');  // not "k" + std::to_string(i): GCC 12's -Wrestrict false positive
  n += std::to_string(i);
  return n;
}

ClockPlan plan20() {
  ClockPlan p;
  p.gpu = "h200";
  p.period_ns = kKernels * 1e6;
  p.switch_latency_ns = 0;
  p.default_clocks = {1980, 3201};
  for (int i = 0; i < kKernels; ++i) p.positions.push_back({name(i), 1e6, i * 1e6, {1980, 3201}});
  return p;
}

struct Job {
  RuntimeCore core{plan20(), {.switch_latency_ns = 0, .min_interval_ns = 0}};
  std::int64_t corr = 0, t = 0;
  void launch(int i) { core.on_launch(name(i), corr++, t += 1000); }
  void step() {
    for (int i = 0; i < kKernels; ++i) launch(i);
  }
  void forward() {
    for (int i = 0; i < 8; ++i) launch(i);
  }
};

TEST(CompleteSteps, CountsTheJobsStepsNotAnEvaluationsForwardPasses) {
  Job j;
  for (int s = 0; s < 10; ++s) j.step();
  EXPECT_EQ(j.core.complete_steps(), 10u);
  for (int e = 0; e < 5; ++e) j.forward();  // an evaluation: five forward passes
  EXPECT_EQ(j.core.complete_steps(), 10u);
  EXPECT_GT(j.core.steps(), 10u);  // what was reported before: every step a placed launch touched
  for (int s = 0; s < 3; ++s) j.step();  // training goes on
  EXPECT_EQ(j.core.complete_steps(), 13u);
  EXPECT_EQ(j.core.stats().steps, 13u);
}

TEST(CompleteSteps, AStepCutShortAtTheJobsEndIsNoStep) {
  Job j;
  for (int s = 0; s < 4; ++s) j.step();
  for (int i = 0; i < 15; ++i) j.launch(i);  // the job ends three quarters into a step
  EXPECT_EQ(j.core.complete_steps(), 4u);
  EXPECT_EQ(j.core.steps(), 5u);
}

// A step whose very last launch is left out (a step variant, a lost launch) still reached its last tenth.
TEST(CompleteSteps, AStepMissingItsLastLaunchStillCounts) {
  Job j;
  for (int s = 0; s < 3; ++s) j.step();
  for (int i = 0; i < kKernels - 1; ++i) j.launch(i);
  j.step();
  EXPECT_EQ(j.core.complete_steps(), 5u);
}

}  // namespace
}  // namespace gearshift::runtime
