// `--evaluate`: a given clock plan on the planner's own DAG and cost model (evaluate.hpp), its three plan formats
// (plan_formats.hpp) and Merak's 1F1B order (merak_order.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "pipeline/error.hpp"
#include "pipeline/evaluate.hpp"
#include "pipeline/merak_order.hpp"
#include "pipeline/plan_formats.hpp"
#include "pipeline/planner.hpp"
#include "pipeline/report.hpp"
#include "pipeline/tests/gunzip.hpp"

namespace gearshift::pipeline {
namespace {

// Two stages, two clocks; times chosen off the grid's edges (10.5 ms -> 10 units). e_eff at P = 50 W, u = 1 ms:
// forward 1400 MHz 2.0 − 0.5 = 1.5 J, 1000 MHz 1.6 − 0.7 = 0.9 J; backward 1400 MHz 4.0 − 1.0 = 3.0 J,
// 1000 MHz 3.2 − 1.4 = 1.8 J.
const char* kTiny =
    "stage,instruction,frequency,time,energy\n"
    "0,forward,1400,0.0105,2.0\n0,forward,1000,0.0145,1.6\n0,backward,1400,0.0205,4.0\n0,backward,1000,0.0285,3.2\n"
    "1,forward,1400,0.0105,2.0\n1,forward,1000,0.0145,1.6\n1,backward,1400,0.0205,4.0\n1,backward,1000,0.0285,3.2\n";

struct Tiny {
  Profile profile = parse_profile(kTiny, "tiny.csv");
  StageModels models;
  PipelineDag dag;
  Tiny() {
    ModelParams mp;
    mp.unit_s = 1e-3;
    mp.blocking_power_w = 50;
    models = build_models(profile, 2, mp);
    dag = build_dag(PipelineSchedule::k1F1B, 2, 2, 1, false);
  }
  Evaluation eval(const std::string& text) {
    PlanFile f = parse_plan_file(text, "plan");
    return evaluate_schedule(dag, models, profile, f.plans.at(0));
  }
};

// All at 1400 MHz, S = 2, M = 2: rank 0 runs F0 F1 B0 B1, rank 1 F0 B0 F1 B1. F0 0-10, F1 10-20 on rank 0;
// rank 1 F0 10-20, B0 20-40, F1 40-50, B1 50-70; rank 0 B0 40-60, B1 70-90: T = 90 units. Compute 2·(2·1.5 + 2·3.0)
// = 18 J, blocking 2·0.090·50 = 9 J.
TEST(Evaluate, LowtimeTuplesAllFastByHand) {
  Tiny t;
  const auto e = t.eval(
      "[\n[('forward', 1400), ('forward', 1400), ('backward', 1400), ('backward', 1400)],\n"
      "[('forward', 1400), ('backward', 1400), ('forward', 1400), ('backward', 1400)],\n]\n"
      "# Iteration 0 cost change: 0\n# Iteration 0 total cost: 18\n");
  EXPECT_EQ(e.T, 90);
  EXPECT_DOUBLE_EQ(e.iteration_time_s, 0.090);
  EXPECT_NEAR(e.compute_j, 18.0, 1e-12);
  EXPECT_NEAR(e.blocking_j, 9.0, 1e-12);
  EXPECT_NEAR(e.energy_j, 27.0, 1e-12);
  ASSERT_EQ(e.ranks.size(), 2u);
  for (const auto& r : e.ranks) {
    EXPECT_NEAR(r.busy_s, 0.060, 1e-12);
    EXPECT_NEAR(r.idle_s, 0.030, 1e-12);
    EXPECT_NEAR(r.energy_j, 13.5, 1e-12);
    EXPECT_EQ(r.clock_min_mhz, 1400);
  }
}

// Rank 1's backwards at 1000 MHz (28 units): rank 1 F0 10-20, B0 20-48, F1 48-58, B1 58-86; rank 0 B0 48-68,
// B1 86-106: T = 106. Compute 9 + (3 + 3.6) = 15.6 J; blocking 2·0.106·50 = 10.6 J.
constexpr double kMixedT = 106, kMixedCompute = 15.6, kMixedBlocking = 10.6;

void expect_mixed(const Evaluation& e) {
  EXPECT_EQ(e.T, kMixedT);
  EXPECT_NEAR(e.compute_j, kMixedCompute, 1e-12);
  EXPECT_NEAR(e.blocking_j, kMixedBlocking, 1e-12);
  EXPECT_NEAR(e.ranks[0].busy_s, 0.060, 1e-12);
  EXPECT_NEAR(e.ranks[1].busy_s, 0.076, 1e-12);
  EXPECT_NEAR(e.ranks[1].idle_s, 0.030, 1e-12);
  EXPECT_NEAR(e.ranks[1].energy_j, 6.6 + 0.106 * 50, 1e-12);
  EXPECT_EQ(e.ranks[1].clock_min_mhz, 1000);
  EXPECT_EQ(e.ranks[1].clock_max_mhz, 1400);
}

TEST(Evaluate, LowtimeTuplesMixedByHand) {
  Tiny t;
  expect_mixed(t.eval("[[('forward', 1400), ('forward', 1400), ('backward', 1400), ('backward', 1400)],"
                      " [('forward', 1400), ('backward', 1000), ('forward', 1400), ('backward', 1000)]]"));
}

TEST(Evaluate, LowtimeBareClocksInTheDagsOrder) {
  Tiny t;
  PlanFile f = parse_plan_file("[\n[1400, 1400, 1400, 1400],\n[1400, 1000, 1400, 1000],\n]\n", "bare.py");
  EXPECT_EQ(f.format, PlanFormat::kLowtimeFreqs);
  EXPECT_FALSE(f.microbatches.has_value());
  expect_mixed(evaluate_schedule(t.dag, t.models, t.profile, f.plans.at(0)));
}

// Merak's stream for S = 2, M = 2: rank 0 Load F0 SendAct Load F1 SendActRecvGrad B0 RecvGrad B1 + 3 closing;
// rank 1 RecvAct Load F0 B0 SendGradRecvAct Load F1 B1 SendGrad + 3 closing (12 entries each). The non-compute
// entries carry 1410 MHz, which the profile lacks: only the computations are priced.
TEST(Evaluate, PerseusSchedPlacedByMerakOrder) {
  Tiny t;
  const char* sched =
      R"([{"rank": 1, "power_states": [1410, 1410, 1400, 1000, 1410, 1410, 1400, 1000, 1410, 1410, 1410, 1410]},
          {"rank": 0, "power_states": [1410, 1400, 1410, 1410, 1400, 1410, 1400, 1410, 1400, 1410, 1410, 1410]}])";
  PlanFile f = parse_plan_file(sched, "sched.json");
  EXPECT_EQ(f.format, PlanFormat::kPerseusSched);
  EXPECT_EQ(f.stages, 2);
  EXPECT_EQ(f.microbatches, 2);
  expect_mixed(evaluate_schedule(t.dag, t.models, t.profile, f.plans.at(0)));
}

TEST(Evaluate, GearshiftScheduleHandWritten) {
  Tiny t;
  nlohmann::json j = {{"stages", 2}, {"microbatches", 2}, {"schedule", "1f1b"}, {"virtual_stages", 1},
                      {"time_unit_s", 1e-3}, {"blocking_power_w", 50.0}, {"cost_model", "hull"}};
  auto ins = [](const char* i, int m, double d, int mhz) {
    return nlohmann::json{{"instruction", i}, {"microbatch", m}, {"chunk", 0}, {"duration_s", d}, {"sm_clock_mhz", mhz}};
  };
  j["plans"] = {{{"name", "mine"},
                 {"ranks",
                  {{{"rank", 0},
                    {"instructions",
                     {ins("forward", 0, 0.010, 1400), ins("forward", 1, 0.010, 1400), ins("backward", 0, 0.020, 1400),
                      ins("backward", 1, 0.020, 1400)}}},
                   {{"rank", 1},
                    {"instructions",
                     {ins("forward", 0, 0.010, 1400), ins("backward", 0, 0.028, 1000), ins("forward", 1, 0.010, 1400),
                      ins("backward", 1, 0.028, 1000)}}}}}}};
  PlanFile f = parse_plan_file(j.dump(), "schedules.json");
  EXPECT_EQ(f.format, PlanFormat::kGearshiftSchedules);
  EXPECT_EQ(f.plans.at(0).name, "mine");
  // Durations at the hull's vertices cost exactly the profile's e_eff: the same figures as by clock.
  expect_mixed(evaluate_schedule(t.dag, t.models, t.profile, f.plans.at(0)));
}

// The one-owner check: the planner's own plans, written as schedules.json and read back, evaluate to the
// planner's own predicted time and energy (the frontier sums its compute energy incrementally: 1e-9 relative).
void expect_reproduces(const Profile& profile, const PipelineProblem& prob, double straggler) {
  const PipelinePlan plan = plan_pipeline(profile, prob);
  const Summary sum = summarise(plan, straggler);
  const PlanFile f = parse_plan_file(schedules_json(plan, sum).dump(), "schedules.json");
  ASSERT_EQ(f.plans.size(), sum.rows.size());
  ModelParams mp = prob.model;
  mp.unit_s = *f.time_unit_s;
  mp.blocking_power_w = *f.blocking_power_w;
  const StageModels models = build_models(profile, f.stages, mp);
  const PipelineDag dag = build_dag(prob.schedule, f.stages, *f.microbatches, *f.virtual_stages, models.recompute);
  for (std::size_t k = 0; k < sum.rows.size(); ++k) {
    const auto& row = sum.rows[k];
    const Evaluation e = evaluate_schedule(dag, models, profile, f.plans[k]);
    const auto& pt = plan.frontier.points[row.point];
    EXPECT_EQ(e.T, pt.T) << row.name;
    EXPECT_DOUBLE_EQ(e.iteration_time_s, row.plan_time_s) << row.name;
    EXPECT_NEAR(e.energy_j, pt.energy_j, 1e-9 * pt.energy_j) << row.name;
    EXPECT_NEAR(e.compute_j, pt.compute_j, 1e-9 * pt.compute_j) << row.name;
    // schedules.json's energy runs to the row's deadline: the GPUs then block at P.
    const double to_deadline = e.energy_j + prob.stages * (row.deadline_s - e.iteration_time_s) * mp.blocking_power_w;
    EXPECT_NEAR(to_deadline, row.energy_j, 1e-9 * row.energy_j) << row.name;
  }
  // Every frontier point, not only the summary's: durations straight from the solver.
  for (std::size_t k = 0; k < plan.frontier.points.size(); k += 7) {
    const auto d = plan.frontier.durations_at(k);
    ClockSchedule s;
    s.name = "point";
    s.ranks.resize(static_cast<std::size_t>(prob.stages));
    for (int r = 0; r < prob.stages; ++r)
      for (int op : plan.dag.rank_order[static_cast<std::size_t>(r)]) {
        PlanStep st;
        st.duration_s = d[static_cast<std::size_t>(op)] * mp.unit_s;
        s.ranks[static_cast<std::size_t>(r)].push_back(st);
      }
    const Evaluation e = evaluate_schedule(plan.dag, plan.models, profile, s);
    EXPECT_EQ(e.T, plan.frontier.points[k].T) << "point " << k;
    EXPECT_NEAR(e.energy_j, plan.frontier.points[k].energy_j, 1e-9 * plan.frontier.points[k].energy_j) << k;
  }
}

TEST(Evaluate, PlannersOwnPlansReproduceItsFiguresTiny) {
  const Profile p = parse_profile(kTiny, "tiny.csv");
  for (auto kind : {CostModelKind::kHull, CostModelKind::kExpFit}) {
    PipelineProblem prob;
    prob.stages = 2;
    prob.microbatches = 5;
    prob.model.unit_s = 1e-3;
    prob.model.blocking_power_w = 50;
    prob.model.kind = kind;
    expect_reproduces(p, prob, 1.2);
  }
}

const std::string kPerseus = std::string(GEARSHIFT_SHARED_DIR) + "/data/perseus/stage_profile/";

TEST(Evaluate, PlannersOwnPlansReproduceItsFiguresPerseusProfiles) {
  if (!std::filesystem::exists(kPerseus)) GTEST_SKIP() << "shared Perseus data not found at " << kPerseus;
  for (const char* model : {"bloom", "gpt3-175b"})
    for (auto kind : {CostModelKind::kHull, CostModelKind::kExpFit})
      for (auto sched : {PipelineSchedule::k1F1B, PipelineSchedule::kGPipe}) {
        PipelineProblem prob;
        prob.schedule = sched;
        prob.stages = 8;
        prob.microbatches = 12;
        prob.model.unit_s = 1e-3;
        prob.model.blocking_power_w = 83.64;
        prob.model.kind = kind;
        expect_reproduces(read_profile(kPerseus + model + "+a100_sxm_bf16.csv"), prob, 1.2);
      }
}

// Clocks given one per instruction at each group's fastest kept option reproduce the planner's all-fastest
// baseline (the cost model at q_min is that option's e_eff).
TEST(Evaluate, FastestKeptClocksGiveThePlannersAllFastestBaseline) {
  if (!std::filesystem::exists(kPerseus)) GTEST_SKIP() << "shared Perseus data not found at " << kPerseus;
  PipelineProblem prob;
  prob.stages = 8;
  prob.microbatches = 12;
  prob.model.blocking_power_w = 83.64;
  const Profile profile = read_profile(kPerseus + "bloom+a100_sxm_bf16.csv");
  const PipelinePlan plan = plan_pipeline(profile, prob);
  ClockSchedule s;
  s.ranks.resize(8);
  for (int r = 0; r < 8; ++r)
    for (int op : plan.dag.rank_order[static_cast<std::size_t>(r)]) {
      PlanStep st;
      st.clock_mhz = plan.model_of(op).kept().front().sm_clock_mhz;
      st.where = "fastest";
      s.ranks[static_cast<std::size_t>(r)].push_back(st);
    }
  const Evaluation e = evaluate_schedule(plan.dag, plan.models, profile, s);
  EXPECT_EQ(e.T, all_fastest_makespan(plan));
  EXPECT_NEAR(e.compute_j, all_fastest_compute_j(plan), 1e-9 * e.compute_j);
}

// ---- Merak's order ----

TEST(MerakOrder, LengthsMatchThePerseusReadme) {
  const std::size_t m128[] = {518, 520, 518, 516}, m32[] = {134, 136, 134, 132};
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(merak_1f1b_stream(4, 128, s).size(), m128[s]) << s;
    EXPECT_EQ(merak_1f1b_stream(4, 32, s).size(), m32[s]) << s;
    EXPECT_EQ(merak_microbatches_for_length(4, s, m128[s]), 128);
  }
  EXPECT_FALSE(merak_microbatches_for_length(4, 0, 517).has_value());
}

// The computations of Merak's stream run in the same order as the planner's 1F1B DAG (dag.hpp), every shape.
TEST(MerakOrder, ComputationsFollowThePlannersOneFOneB) {
  for (int S = 1; S <= 6; ++S)
    for (int M = 1; M <= 9; ++M) {
      const PipelineDag dag = build_dag(PipelineSchedule::k1F1B, S, M, 1, false);
      for (int s = 0; s < S; ++s) {
        std::vector<std::pair<bool, int>> merak, ours;
        for (const auto& e : merak_1f1b_stream(S, M, s))
          if (e.command == MerakCommand::kForwardPass || e.command == MerakCommand::kBackwardPass)
            merak.emplace_back(e.command == MerakCommand::kForwardPass, e.microbatch);
        for (int op : dag.rank_order[static_cast<std::size_t>(s)])
          ours.emplace_back(dag.ops[static_cast<std::size_t>(op)].instruction == Instruction::kForward,
                            dag.ops[static_cast<std::size_t>(op)].microbatch);
        EXPECT_EQ(merak, ours) << "S=" << S << " M=" << M << " rank " << s;
        EXPECT_EQ(merak_1f1b_stream(S, M, s).back().command, MerakCommand::kOptimizerStep);
      }
    }
}

// Every measured Perseus plan's sched.json is placed: 4 ranks, the README's microbatch counts.
TEST(MerakOrder, EveryMeasuredPerseusPlanIsPlaced) {
  const std::string base = std::string(GEARSHIFT_SHARED_DIR) + "/data/perseus_measured/perseus/A100/";
  if (!std::filesystem::exists(base)) GTEST_SKIP() << "shared measured Perseus data not found at " << base;
  const std::pair<const char*, int> models[] = {{"bert-huge-uncased", 32}, {"bloom-3b", 128}, {"t5-3b", 32}};
  for (const auto& [model, M] : models) {
    int plans = 0;
    for (int n = 0; std::filesystem::exists(base + model + "/" + std::to_string(n) + ".sched.json.gz"); ++n, ++plans) {
      const PlanFile f = parse_plan_file(test::gunzip(base + model + "/" + std::to_string(n) + ".sched.json.gz"), model);
      EXPECT_EQ(f.stages, 4);
      EXPECT_EQ(f.microbatches, M) << model << " " << n;
      for (const auto& r : f.plans.at(0).ranks) EXPECT_EQ(r.size(), 2u * M);
    }
    EXPECT_GE(plans, 20) << model;
  }
}

// ---- bad inputs: one clear line each ----

std::string error_of(const std::string& text) {
  try {
    Tiny t;
    PlanFile f = parse_plan_file(text, "p.json");
    evaluate_schedule(t.dag, t.models, t.profile, f.plans.at(0));
  } catch (const PipelineError& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_error(const std::string& text, const std::string& says) {
  const std::string e = error_of(text);
  EXPECT_NE(e.find(says), std::string::npos) << "got: " << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

const char* kOkRank0 = R"({"rank": 0, "power_states": [1410, 1400, 1410, 1410, 1400, 1410, 1400, 1410, 1400, 1410, 1410, 1410]})";

TEST(EvaluateBadInputs, EachGetsItsClearError) {
  expect_error("", "p.json: empty file; expected gearshift's schedules.json");
  expect_error("  \n", "empty file");
  expect_error("hello", "p.json: not a plan; expected gearshift's schedules.json ({\"plans\": [...]}), a lowtime");
  expect_error("{\"a\": 1}", "a JSON object without 'plans'");
  expect_error("[]", "an empty list");
  // Wrong lengths.
  expect_error(std::string("[") + kOkRank0 + R"(, {"rank": 1, "power_states": [1410, 1410, 1400, 1000]}])",
               "rank 1: 4 power states; Merak's 1F1B order for 2 stages x 2 microbatches (from rank 0's 12) has 12");
  expect_error(R"([{"rank": 0, "power_states": [1400, 1400]}, {"rank": 1, "power_states": [1400]}])",
               "rank 0: 2 power states fit no microbatch count of Merak's 1F1B order for 2 stages");
  expect_error("[[('forward', 1400), ('forward', 1400), ('backward', 1400)], [('forward', 1400), ('backward', 1400),"
               " ('forward', 1400), ('backward', 1400)]]",
               "rank 0: 3 computations; the DAG of 2 stages x 2 microbatches runs 4 on this rank");
  // Unknown and repeated ranks.
  expect_error(std::string("[") + kOkRank0 + R"(, {"rank": 5, "power_states": []}])",
               "entry 1: unknown rank 5 (the plan has 2 entries: ranks 0..1)");
  expect_error(std::string("[") + kOkRank0 + ", " + kOkRank0 + "]", "entry 1: rank 0 appears twice");
  // Non-number clocks.
  expect_error(std::string("[") + kOkRank0 +
                   R"(, {"rank": 1, "power_states": [1410, 1410, "abc", 1000, 1410, 1410, 1400, 1000, 1410, 1410, 1410, 1410]}])",
               "p.json: rank 1 power_states[2] is \"abc\", not a clock in MHz");
  expect_error("[[('forward', 'fast')]]", "stage 0 item 0: 'fast' is not a clock in MHz");
  expect_error("[[('forward', 1400.5)]]", "'1400.5' is not a clock in MHz");
  expect_error("[[1400, x]]", "line 1: 'x' is not a clock in MHz");
  // A clock the profile does not list: refused, naming the nearest.
  expect_error("[[1400, 1400, 1047, 1400], [1400, 1400, 1400, 1400]]",
               "stage 0 item 2 (backward of microbatch 0 on stage 0): 1047 MHz is not a profiled clock of stage 0 "
               "backward (nearest 1000 and 1400 MHz)");
  // An instruction out of the DAG's order.
  expect_error("[[('forward', 1400), ('backward', 1400), ('forward', 1400), ('backward', 1400)], [('forward', 1400),"
               " ('backward', 1400), ('forward', 1400), ('backward', 1400)]]",
               "stage 0 item 1: backward where the DAG's order runs the forward of microbatch 1");
}

}  // namespace
}  // namespace gearshift::pipeline
