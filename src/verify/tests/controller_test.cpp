#include "verify/controller.hpp"

#include <gtest/gtest.h>

namespace gearshift::verify {
namespace {

Ladder ladder() {
  Ladder l;
  l.duration_ns = {1e6};
  l.plan = {{990, 2619}};
  l.baseline = {1980, 2619};
  for (int f = 345; f <= 1980; f += 15) l.sm_clocks_mhz.push_back(f);
  return l;
}

// A block of `n` steps of `step_s` each at `watts`, with a counter window over all of it.
BlockResult block(double step_s, double watts, int n = 10) {
  BlockResult r;
  r.step_s.assign(static_cast<std::size_t>(n), step_s);
  r.energy_seconds = step_s * n;
  r.joules = watts * r.energy_seconds;
  return r;
}

// Runs quads with the plan at `plan_step`/`plan_w` against 1 s / 100 W, alternating tiny noise so the intervals
// have width, until the controller leaves `verifying` or `max_blocks` blocks ran.
void run(Controller& c, double plan_step, double plan_w, int max_blocks = 400) {
  int i = 0;
  while (c.phase() == Phase::verifying && i < max_blocks) {
    const BlockPlan b = c.next();
    const double wiggle = (i % 3 == 0 ? 1.0005 : 0.9997);
    c.finish_block(b.arm == Arm::plan ? block(plan_step * wiggle, plan_w) : block(1.0 * wiggle, 100));
    ++i;
  }
}

TEST(Controller, BlocksComeInAbbaThenBaabOrder) {
  Controller c({}, ladder());
  std::vector<Arm> arms;
  for (int i = 0; i < 8; ++i) {
    arms.push_back(c.next().arm);
    c.finish_block(block(1.0, 100));
  }
  const Arm P = Arm::plan, B = Arm::baseline;
  EXPECT_EQ(arms, (std::vector<Arm>{P, B, B, P, B, P, P, B}));
}

TEST(Controller, APlanWithinTheBudgetHoldsAfterMinQuads) {
  ControllerOptions o;
  o.budget = 0.01;
  Controller c(o, ladder());
  run(c, 1.002, 80);
  ASSERT_EQ(c.phase(), Phase::held);
  EXPECT_EQ(c.rungs().back().quads.size(), o.min_quads);
  EXPECT_DOUBLE_EQ(c.alpha(), 1);
  ASSERT_TRUE(c.current().saving);
  EXPECT_NEAR(c.current().saving->estimate, 1 - 0.8 * 1.002, 1e-3);
  EXPECT_EQ(c.events().back().kind, "hold");
  // Steady state: plan-only blocks, then a quad.
  for (std::size_t i = 0; i < o.steady_gap_first; ++i) {
    EXPECT_FALSE(c.next().measured);
    c.finish_block(block(1.002, 80));
  }
  EXPECT_TRUE(c.next().measured);
}

// Once held, quads go on at a lower rate; a job whose plan later costs more than the budget (its behaviour changed)
// is caught by them and backed off (`recheck_over`), and the steady state's baseline blocks stay a bounded share.
TEST(Controller, AHeldPlanIsRecheckedAndBackedOffWhenTheJobChanges) {
  ControllerOptions o;
  o.budget = 0.01;
  Controller c(o, ladder());
  run(c, 1.002, 80);
  ASSERT_EQ(c.phase(), Phase::held);
  std::size_t baseline_blocks = 0, blocks = 0;
  for (int i = 0; i < 400 && c.phase() == Phase::held; ++i, ++blocks) {
    const BlockPlan b = c.next();
    baseline_blocks += b.arm == Arm::baseline;
    const double wiggle = (i % 3 == 0 ? 1.0005 : 0.9997);
    c.finish_block(b.arm == Arm::plan ? block((i < 100 ? 1.002 : 1.03) * wiggle, 80) : block(1.0 * wiggle, 100));
  }
  ASSERT_FALSE(c.events().empty());
  EXPECT_EQ(c.events().back().kind, "recheck_over");
  EXPECT_LT(c.alpha(), 1.0);
  // Before the change: gaps of 4, 8, 16, 32 plan-only blocks between quads, 2 baseline blocks a quad.
  EXPECT_LT(static_cast<double>(baseline_blocks) / static_cast<double>(blocks), 0.25);
}

TEST(Controller, APlanOverTheBudgetBacksOffByTheMeasuredSensitivity) {
  ControllerOptions o;
  o.budget = 0.005;
  Controller c(o, ladder());
  // One position taking the whole step at half the clock: shape(1) = 1; a 2 % slowdown = sensitivity 0.02.
  run(c, 1.02, 70, 12);
  ASSERT_EQ(c.events().size(), 1u);
  EXPECT_EQ(c.events()[0].kind, "back_off");
  EXPECT_NEAR(c.sensitivity(), 0.02, 1e-3);
  // The new rung's shape keeps 0.8 x 0.5 % at the sensitivity's upper bound: about 0.2 of the shape.
  EXPECT_LT(c.alpha(), 0.3);
  EXPECT_GT(c.alpha(), 0.1);
  EXPECT_LE(c.ladder().shape(c.alpha()) * c.sensitivity_upper(), 0.8 * 0.005 + 1e-12);
}

// A job whose step time ignores the first 40 % of the plan's clock shape and then rises steeply (measured kernel
// sweeps look like this: flat over most of the ladder, then a knee). The one sensitivity the back-off measures
// through the origin puts the first held rung far under the budget; climbing (a bisection toward the rung that
// broke it) ends on a rung near the knee, still within the budget, after one climb that broke it and came back.
TEST(Controller, AHeldRungFarUnderTheBudgetClimbsTowardTheKnee) {
  ControllerOptions o;
  o.budget = 0.01;
  Controller c(o, ladder());
  auto slowdown = [](double shape) { return std::max(0.0, shape - 0.4) * 0.1; };  // 6 % at the plan
  for (int i = 0; i < 1500 && (c.phase() == Phase::verifying || c.events().back().kind != "hold" ||
                               c.rungs().size() < 5); ++i) {
    const BlockPlan b = c.next();
    const double s = c.ladder().shape(b.arm == Arm::plan ? b.alpha : 0);
    const double wiggle = (i % 3 == 0 ? 1.0005 : 0.9997);
    c.finish_block(block((1 + slowdown(s)) * wiggle, 100 * (1 - 0.2 * s)));
  }
  std::vector<std::string> kinds;
  for (const auto& e : c.events()) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"back_off", "hold", "climb", "climb_back", "climb", "hold", "climb",
                                             "hold"}));
  ASSERT_EQ(c.phase(), Phase::held);
  const double s = c.ladder().shape(c.alpha());
  EXPECT_LE(slowdown(s), o.budget);  // within the budget by the truth
  EXPECT_GT(s, 0.4);                 // past the knee's start: the back-off alone stopped near 0.13
  EXPECT_EQ(c.rungs()[c.rung_index()].alpha, c.alpha());
  ASSERT_EQ(c.rungs().size(), 5u);  // the plan, the back-off, three climbs (the first came back)
  EXPECT_EQ(c.rungs()[2].outcome, "climb_back");
  EXPECT_EQ(c.rung_index(), 4u);
}

TEST(Controller, APlanThatCostsEnergyIsDroppedForTheBaseline) {
  Controller c({}, ladder());
  run(c, 1.0, 110);
  EXPECT_EQ(c.phase(), Phase::baseline);
  EXPECT_EQ(c.events().back().kind, "drop");
  EXPECT_EQ(c.next().arm, Arm::baseline);
  EXPECT_FALSE(c.next().measured);
}

TEST(Controller, AStallReRunsTheBlock) {
  Controller c({}, ladder());
  BlockResult r = block(1.0, 100);
  r.step_s[4] = 9.0;  // a checkpoint save
  const Arm first = c.next().arm;
  const auto ev = c.finish_block(r);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "stall");
  EXPECT_EQ(c.next().arm, first);  // the same block again
}

TEST(Controller, ABlockWithoutTicksCountsForTimeOnly) {
  Controller c({}, ladder());
  for (int i = 0; i < 4; ++i) {
    BlockResult r = block(1.0, 100);
    r.energy_seconds = 0, r.joules = 0;
    EXPECT_EQ(c.finish_block(r).at(0).kind, "no_tick");
  }
  EXPECT_EQ(c.current().quads, 1u);
  EXPECT_EQ(c.current().energy_quads, 0u);
}

// A dry run measures only: an A/A comparison's verdict would be about noise (on an H200, a GPT job's dry run was
// "dropped for no saving" after 10 quads, its two arms the same clocks).
TEST(Controller, MeasureOnlyNeverDecides) {
  ControllerOptions o;
  o.decide = false;
  Controller c(o, ladder());
  run(c, 1.05, 110, 200);  // over the budget and costing energy: a deciding loop would back off or drop
  EXPECT_EQ(c.phase(), Phase::verifying);
  EXPECT_TRUE(c.events().empty());
  EXPECT_EQ(c.current().quads, 50u);
  EXPECT_NEAR(c.current().slowdown.estimate, 0.05, 1e-3);
}

TEST(Controller, BadOptionsAreRefused) {
  ControllerOptions o;
  o.min_quads = 1;
  EXPECT_THROW(Controller(o, ladder()), std::invalid_argument);
}

}  // namespace
}  // namespace gearshift::verify
