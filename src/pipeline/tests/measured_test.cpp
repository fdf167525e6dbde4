// Issue 47 items 2 and 3: measured runs (measured_run.hpp), the time the graph leaves out (left_out_time.hpp) and a
// profile built from measured plans (measured_profile.hpp). Synthetic runs with known lag/overhead/power first.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/error.hpp"
#include "pipeline/evaluate.hpp"
#include "pipeline/left_out_time.hpp"
#include "pipeline/measured_profile.hpp"
#include "pipeline/measured_run.hpp"

namespace gearshift::pipeline {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const PipelineError& e) {
    return e.what();
  }
  return "(no error)";
}

// S = 2, M = 1: F(r0) → F(r1) → B(r1) → B(r0), 1 + 2 + 3 + 4 s; two cross-stage edges.
TEST(LeftOutTime, LongestPathAddsTheLagOnCrossStageEdges) {
  const PipelineDag dag = build_dag(PipelineSchedule::k1F1B, 2, 1, 1, false);
  std::vector<double> t(dag.ops.size());
  for (std::size_t i = 0; i < dag.ops.size(); ++i)
    t[i] = dag.ops[i].instruction == Instruction::kForward ? (dag.ops[i].rank ? 2.0 : 1.0)
                                                           : (dag.ops[i].rank ? 3.0 : 4.0);
  int crossings = -1;
  EXPECT_DOUBLE_EQ(longest_path_s(dag, t, 0.0, &crossings), 10.0);
  EXPECT_EQ(crossings, 2);
  EXPECT_DOUBLE_EQ(longest_path_s(dag, t, 0.5, &crossings), 11.0);
  EXPECT_EQ(crossings, 2);
}

// A measured run of S = 3, M = 4 whose iteration is the graph at a true lag of 2 ms plus a true overhead of 50 ms.
struct Synthetic {
  PipelineDag dag = build_dag(PipelineSchedule::k1F1B, 3, 4, 1, false);
  MeasuredRun run;
  double lag = 0.002, overhead = 0.050;
  Synthetic() {
    run.source = "synthetic.prof.json";
    run.microbatches = 4;
    run.iterations = 3;
    for (int r = 0; r < 3; ++r) {
      MeasuredRank m;
      for (int k = 0; k < 4; ++k) {
        m.forward_s.push_back(0.010 + 0.001 * r + 0.0003 * k);
        m.backward_s.push_back(0.021 + 0.002 * r - 0.0002 * k);
        m.load_s.push_back(r == 0 || r == 2 ? 0.0015 : 0.0);
      }
      run.ranks.push_back(m);
    }
    const double T = longest_path_s(dag, measured_op_times(dag, run), lag) + overhead;
    for (auto& m : run.ranks) m.iteration_s = T, m.energy_j = 100;
  }
};

TEST(LeftOutTime, RecoversTheOverheadGivenTheLag) {
  Synthetic s;
  const LeftOutTime lo = fit_left_out_time(s.dag, s.run, s.lag);
  EXPECT_NEAR(lo.overhead_s, s.overhead, 1e-12);
  EXPECT_GT(lo.crossings, 0);
  // At lag 0 the same measured iteration is matched by overhead + crossings·lag: the two are not separable from
  // one iteration (left_out_time.hpp), so the fit takes the lag as given.
  int crossings = 0;
  longest_path_s(s.dag, measured_op_times(s.dag, s.run), s.lag, &crossings);
  const LeftOutTime lo0 = fit_left_out_time(s.dag, s.run, 0.0);
  EXPECT_NEAR(lo0.overhead_s, s.overhead + crossings * s.lag, 1e-12);
  EXPECT_NEAR(lo0.graph_s + lo0.overhead_s, lo0.measured_iteration_s, 1e-12);
}

TEST(LeftOutTime, AddedTimeIsWaitingAtTheBlockingPower) {
  Synthetic s;
  const LeftOutTime lo = fit_left_out_time(s.dag, s.run, s.lag);
  Evaluation ev;
  ev.op_time_s = measured_op_times(s.dag, s.run);
  ev.iteration_time_s = longest_path_s(s.dag, ev.op_time_s, 0.0);
  ev.energy_j = 1000;
  ev.blocking_j = 200;
  ev.ranks.resize(3);
  add_left_out_time(ev, s.dag, lo, 60.0);
  // The graph evaluated at the run's own times predicts the run's own iteration.
  EXPECT_NEAR(ev.iteration_time_s, s.run.iteration_s(), 1e-12);
  EXPECT_NEAR(ev.left_out_j, 3 * ev.left_out_s * 60.0, 1e-9);
  EXPECT_NEAR(ev.energy_j, 1000 + ev.left_out_j, 1e-9);
  EXPECT_NEAR(ev.blocking_j, 200 + ev.left_out_j, 1e-9);
  EXPECT_NEAR(ev.ranks[1].idle_s, ev.left_out_s, 1e-12);
}

TEST(LeftOutTime, BadInputsGetClearErrors) {
  Synthetic s;
  const PipelineDag four = build_dag(PipelineSchedule::k1F1B, 4, 4, 1, false);
  EXPECT_EQ(error_of([&] { fit_left_out_time(four, s.run, 0); }),
            "synthetic.prof.json: 3 ranks measured; the pipeline has 4 stages");
  const PipelineDag m8 = build_dag(PipelineSchedule::k1F1B, 3, 8, 1, false);
  EXPECT_EQ(error_of([&] { fit_left_out_time(m8, s.run, 0); }),
            "synthetic.prof.json: 4 microbatches measured per iteration; the pipeline has 8");
  EXPECT_NE(error_of([&] { fit_left_out_time(s.dag, s.run, 1.0); }).find("longer than the measured iteration"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { fit_left_out_time(s.dag, s.run, -1); }), "the send/receive lag must be ≥ 0 s");
}

json prof_rank(int r, double it, double e, int M, double f, double b) {
  json fw = json::array(), bw = json::array(), ld = json::array();
  for (int i = 0; i < 3; ++i) {
    fw.push_back(std::vector<double>(static_cast<std::size_t>(M), f));
    bw.push_back(std::vector<double>(static_cast<std::size_t>(M), b));
    ld.push_back(std::vector<double>(static_cast<std::size_t>(2 * M), 0.001));
  }
  return {{"rank", r},
          {"iter_time", {it + 1, it, it}},
          {"iter_energy", {e + 50, e, e}},
          {"time_breakdown", {{"forward", fw}, {"backward", bw}, {"load", ld}}},
          {"energy_breakdown", json::object()}};
}

TEST(MeasuredRun, ParsesAndDropsTheWarmUpIteration) {
  const json j = {prof_rank(1, 2.0, 300, 2, 0.1, 0.2), prof_rank(0, 2.2, 310, 2, 0.1, 0.2)};
  const MeasuredRun run = parse_measured_run(j.dump(), "p.json");
  ASSERT_EQ(run.ranks.size(), 2u);
  EXPECT_EQ(run.microbatches, 2);
  EXPECT_EQ(run.iterations, 2);
  EXPECT_DOUBLE_EQ(run.ranks[0].iteration_s, 2.2);
  EXPECT_DOUBLE_EQ(run.iteration_s(), 2.1);
  EXPECT_DOUBLE_EQ(run.energy_j(), 610);
  EXPECT_DOUBLE_EQ(run.ranks[1].load_s[1], 0.002);  // two loads per microbatch, summed
}

TEST(MeasuredRun, BadInputsGetClearErrors) {
  auto err = [](const json& j) { return error_of([&] { parse_measured_run(j.dump(), "p.json"); }); };
  json r0 = prof_rank(0, 2.0, 300, 2, 0.1, 0.2);
  json no_energy = r0;
  no_energy.erase("iter_energy");
  EXPECT_EQ(err(json::array({no_energy})), "p.json: rank 0 has no \"iter_energy\"");
  json no_backward = r0;
  no_backward["time_breakdown"].erase("backward");
  EXPECT_EQ(err(json::array({no_backward})), "p.json: rank 0 time_breakdown has no \"backward\"");
  json one_iter = r0;
  one_iter["iter_time"] = {2.0};
  EXPECT_EQ(err(json::array({one_iter})),
            "p.json: rank 0 iter_time lists 1 iterations; 2 or more are needed (the first is warm-up)");
  json nan_time = r0;
  nan_time["iter_time"][1] = "x";
  EXPECT_EQ(err(json::array({nan_time})), "p.json: rank 0 iter_time[1] is not a number");
  EXPECT_EQ(err(json::array({r0, prof_rank(0, 2.0, 300, 2, 0.1, 0.2)})), "p.json: rank 0 is listed twice");
  EXPECT_EQ(err(json::array({r0, prof_rank(2, 2.0, 300, 2, 0.1, 0.2)})), "p.json: rank 1 is missing (ranks must be 0..1)");
  EXPECT_EQ(err(json::array({r0, prof_rank(1, 2.0, 300, 3, 0.1, 0.2)})),
            "p.json: rank 1: 3 forwards per iteration; rank 0 has 2");
  EXPECT_EQ(err(json::object()), "p.json: expected a Perseus prof.json: a non-empty list of {\"rank\", \"iter_time\", "
                                 "\"iter_energy\", \"time_breakdown\"}");
}

// ---- profile from measured plans: known power recovered ----

// S = 2, M = 2. Forward time 10 ms·1410/c (+1 ms load on both ranks), backward 20 ms·1410/c, stage 1 10 % slower;
// true busy power a_s + b_s·x + k·x² (x = c/1000) with (a, b) = (40, 50), (60, 20), k = 60, P_block = 70 W.
constexpr double kA[2] = {40, 60}, kB[2] = {50, 20}, kK = 60, kPblock = 70;
double power(int s, int c) { return kA[s] + kB[s] * c / 1000.0 + kK * c / 1000.0 * c / 1000.0; }
double ftime(int s, int c) { return 0.010 * 1410.0 / c * (s ? 1.1 : 1.0); }
double btime(int s, int c) { return 0.020 * 1410.0 / c * (s ? 1.1 : 1.0); }

// clocks[s] = {F0, F1, B0, B1} clocks of stage s.
MeasuredPlan synthetic_plan(const std::string& name, const std::vector<std::vector<int>>& clocks, double iter_s) {
  MeasuredPlan p;
  p.name = name;
  p.run.source = name + ".prof.json";
  p.run.microbatches = 2;
  p.run.iterations = 2;
  p.schedule.name = name;
  p.schedule.source = name + ".sched.json";
  for (int s = 0; s < 2; ++s) {
    MeasuredRank m;
    std::vector<PlanStep> steps;
    double e = 0, busy = 0;
    const auto& c = clocks[static_cast<std::size_t>(s)];
    for (int k = 0; k < 2; ++k) {
      m.forward_s.push_back(ftime(s, c[static_cast<std::size_t>(k)]));
      m.load_s.push_back(0.001);
      m.backward_s.push_back(btime(s, c[static_cast<std::size_t>(2 + k)]));
      steps.push_back({Instruction::kForward, k, std::nullopt, c[static_cast<std::size_t>(k)], std::nullopt, "f"});
      steps.push_back({Instruction::kBackward, k, std::nullopt, c[static_cast<std::size_t>(2 + k)], std::nullopt, "b"});
      const double tf = m.forward_s.back() + 0.001, tb = m.backward_s.back();
      e += power(s, c[static_cast<std::size_t>(k)]) * tf + power(s, c[static_cast<std::size_t>(2 + k)]) * tb;
      busy += tf + tb;
    }
    m.iteration_s = iter_s;
    m.energy_j = e + kPblock * (iter_s - busy);
    p.run.ranks.push_back(m);
    p.schedule.ranks.push_back(steps);
  }
  return p;
}

std::vector<MeasuredPlan> synthetic_plans() {
  return {synthetic_plan("0", {{1410, 1410, 1410, 1410}, {1410, 1410, 1410, 1410}}, 0.150),
          synthetic_plan("1", {{1200, 1200, 1200, 1200}, {1200, 1200, 1200, 1200}}, 0.175),
          synthetic_plan("2", {{1200, 1410, 1410, 1200}, {1410, 1200, 1200, 1410}}, 0.170),
          synthetic_plan("3", {{1005, 1410, 1200, 1005}, {1005, 1200, 1410, 1005}}, 0.200),
          synthetic_plan("4", {{1005, 1005, 1005, 1005}, {1005, 1005, 1005, 1005}}, 0.230)};
}

TEST(MeasuredProfile, RecoversKnownPowerAndTimes) {
  const MeasuredProfile mp = build_measured_profile(synthetic_plans());
  EXPECT_NEAR(mp.blocking_power_w, kPblock, 1e-6);
  for (int s = 0; s < 2; ++s) {
    EXPECT_NEAR(mp.power[static_cast<std::size_t>(s)].a_w, kA[s], 1e-6);
    EXPECT_NEAR(mp.power[static_cast<std::size_t>(s)].b_w_per_ghz, kB[s], 1e-6);
    EXPECT_NEAR(mp.power[static_cast<std::size_t>(s)].k_w_per_ghz2, kK, 1e-6);
  }
  EXPECT_LT(mp.rms_residual_j, 1e-9);
  EXPECT_EQ(mp.plans, 5);
  EXPECT_EQ(mp.interpolated_rows, 0);
  ASSERT_EQ(mp.profile.rows.size(), 2u * 2u * 3u);  // stages x instructions x clocks {1005, 1200, 1410}
  for (const auto& r : mp.profile.rows) {
    const double t = r.instruction == Instruction::kForward ? ftime(r.stage, r.sm_clock_mhz) + 0.001
                                                            : btime(r.stage, r.sm_clock_mhz);
    EXPECT_NEAR(r.time_s, t, 1e-12) << r.stage << " " << r.sm_clock_mhz;
    EXPECT_NEAR(r.energy_j, power(r.stage, r.sm_clock_mhz) * t, 1e-9);
  }
  // The CSV reads back as a valid gearshift profile of the same rows.
  const Profile back = parse_profile(measured_profile_csv(mp, "synthetic"), "m.csv");
  validate_profile(back, 2);
  EXPECT_EQ(back.rows.size(), mp.profile.rows.size());
}

TEST(MeasuredProfile, ClocksAStageDidNotRunAreInterpolatedOrExtrapolated) {
  auto plans = synthetic_plans();
  // Stage 1's backwards at 1005 MHz (plans 3 and 4) are replaced by 1305 MHz: 1005 MHz is then outside
  // stage 1 backward's measured range (extrapolated through 1200 and 1305 MHz) and 1305 MHz inside every other
  // group's (interpolated). Times are 1/clock, so the line through two clocks is exact only at them.
  plans[3] = synthetic_plan("3", {{1005, 1410, 1200, 1005}, {1005, 1200, 1410, 1305}}, 0.200);
  plans[4] = synthetic_plan("4", {{1005, 1005, 1005, 1005}, {1005, 1005, 1305, 1305}}, 0.230);
  const MeasuredProfile mp = build_measured_profile(plans);
  EXPECT_EQ(mp.interpolated_rows, 3);  // 1305 MHz for stage 0 forward, stage 0 backward, stage 1 forward
  EXPECT_EQ(mp.extrapolated_rows, 1);  // 1005 MHz for stage 1 backward
  EXPECT_EQ(mp.profile.rows.size(), 2u * 2u * 4u);
  validate_profile(mp.profile, 2);
  int checked = 0;
  for (const auto& r : mp.profile.rows) {
    if (r.sm_clock_mhz == 1305 && r.stage == 0 && r.instruction == Instruction::kForward) {
      EXPECT_NEAR(r.time_s, (ftime(0, 1200) + ftime(0, 1410)) / 2 + 0.001, 1e-12);
      ++checked;
    }
    if (r.sm_clock_mhz == 1005 && r.stage == 1 && r.instruction == Instruction::kBackward) {
      const double t1200 = btime(1, 1200), t1305 = btime(1, 1305);
      EXPECT_NEAR(r.time_s, t1200 + (t1305 - t1200) * (1005 - 1200) / 105.0, 1e-12);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);
}

TEST(MeasuredProfile, BadInputsGetClearErrors) {
  EXPECT_EQ(error_of([] { build_measured_profile({}); }), "no measured plans to build a profile from");
  // Every plan at one clock: busy power at 0 MHz and its slope cannot be told apart.
  auto same = synthetic_plans();
  same[1] = same[2] = same[3] = same[4] = same[0];
  EXPECT_NE(error_of([&] { build_measured_profile(same); }).find("do not determine the power fit"), std::string::npos);
  // Rank count mismatch between a plan's sched and its run.
  auto ranks = synthetic_plans();
  ranks[2].schedule.ranks.pop_back();
  EXPECT_EQ(error_of([&] { build_measured_profile(ranks); }),
            "plan 2: the sched has 1 ranks, the measured run (2.prof.json) 2");
  // Too few (plan, rank) energies for 6 unknowns.
  auto few = synthetic_plans();
  few.resize(2);
  EXPECT_EQ(error_of([&] { build_measured_profile(few); }),
            "the power fit has 6 unknowns but only 4 (plan, rank) energies; give more plans");
  // A clock the profile does not list is refused by --evaluate (evaluate.hpp), naming the nearest.
  const MeasuredProfile mp = build_measured_profile(synthetic_plans());
  ModelParams params;
  params.unit_s = 1e-4;
  params.blocking_power_w = mp.blocking_power_w;
  const StageModels models = build_models(mp.profile, 2, params);
  const PipelineDag dag = build_dag(PipelineSchedule::k1F1B, 2, 2, 1, false);
  ClockSchedule sch;
  sch.name = "x";
  sch.ranks.resize(2);
  for (int r = 0; r < 2; ++r)
    for (int op : dag.rank_order[static_cast<std::size_t>(r)]) {
      const DagOp& o = dag.ops[static_cast<std::size_t>(op)];
      const bool odd = r == 1 && o.instruction == Instruction::kBackward && o.microbatch == 1;
      sch.ranks[static_cast<std::size_t>(r)].push_back(
          {o.instruction, o.microbatch, std::nullopt, odd ? 1305 : 1410, std::nullopt, odd ? "rank 1 step 3" : "s"});
    }
  EXPECT_NE(error_of([&] { evaluate_schedule(dag, models, mp.profile, sch); })
                .find("1305 MHz is not a profiled clock of stage 1 backward (nearest 1200 and 1410 MHz)"),
            std::string::npos);
}

}  // namespace
}  // namespace gearshift::pipeline
