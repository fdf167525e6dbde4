// `gearshift pipeline PROFILE --evaluate PLAN` through the real binary: the planner's own schedules.json evaluates
// to the planner's own figures; a Perseus sched.json; bad plans exit 3 with one line naming the file; options that
// contradict the plan exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "run_binary.hpp"
#include "tmp_dir.hpp"

namespace gearshift {
namespace {

namespace fs = std::filesystem;
using test::Result;
using test::run;

struct TmpDir : test::TmpDir {
  TmpDir() : test::TmpDir("gearshift_pipeline_evaluate_") {}
};

const char* kTiny =
    "stage,instruction,frequency,time,energy\n"
    "0,forward,1400,0.0105,2.0\n0,forward,1200,0.0122,1.75\n0,forward,1000,0.0145,1.6\n"
    "0,backward,1400,0.0205,4.0\n0,backward,1200,0.0241,3.5\n0,backward,1000,0.0285,3.2\n"
    "1,forward,1400,0.0105,2.0\n1,forward,1200,0.0122,1.75\n1,forward,1000,0.0145,1.6\n"
    "1,backward,1400,0.0215,4.2\n1,backward,1200,0.0251,3.6\n1,backward,1000,0.0295,3.3\n";

nlohmann::json json_of(const Result& r) {
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

TEST(PipelineEvaluateCli, PlannersOwnSchedulesEvaluateToItsFigures) {
  TmpDir t;
  const std::string prof = t.write("tiny.csv", kTiny);
  for (const char* model : {"hull", "exp-fit"}) {
    const std::string out = (t.dir / model).string();
    Result plan = run("pipeline " + prof + " --stages 2 --microbatches 6 --blocking-power-w 50 --cost-model " + model +
                      " --deadline-ms 240 --json -o " + out);
    ASSERT_EQ(plan.code, 0) << plan.out;
    const auto summary = json_of(plan);
    Result ev = run("pipeline " + prof + " --evaluate " + out + "/schedules.json --json");
    ASSERT_EQ(ev.code, 0) << ev.out;
    const auto j = json_of(ev);
    EXPECT_EQ(j["modelled"], true);
    EXPECT_EQ(j["plan_format"], "gearshift schedules.json");
    EXPECT_EQ(j["cost_model"], model);  // from the file
    EXPECT_EQ(j["blocking_power_w"], 50.0);
    ASSERT_EQ(j["plans"].size(), summary["points"].size());
    ASSERT_EQ(j["plans"].size(), 4u);
    for (std::size_t k = 0; k < j["plans"].size(); ++k) {
      const auto& e = j["plans"][k];
      const auto& p = summary["points"][k];
      EXPECT_EQ(e["name"], p["name"]);
      EXPECT_DOUBLE_EQ(e["iteration_time_s"].get<double>(), p["plan_time_s"].get<double>()) << p["name"];
      // The summary's energy runs to the point's deadline, the GPUs blocking at 50 W after the plan ends.
      const double to_deadline =
          e["energy_j"].get<double>() + 2 * (p["deadline_s"].get<double>() - e["iteration_time_s"].get<double>()) * 50;
      EXPECT_NEAR(to_deadline, p["energy_j"].get<double>(), 1e-9 * p["energy_j"].get<double>()) << p["name"];
      double busy = 0;
      for (const auto& r : e["ranks"]) {
        EXPECT_NEAR(r["busy_s"].get<double>() + r["idle_s"].get<double>(), e["iteration_time_s"].get<double>(), 1e-12);
        busy += r["busy_s"].get<double>();
      }
      EXPECT_GT(busy, 0);
    }
  }
}

TEST(PipelineEvaluateCli, PerseusSchedTextAndEvaluationJson) {
  TmpDir t;
  const std::string prof = t.write("tiny.csv", kTiny);
  // S = 2, M = 2 (Merak: 12 entries per rank); computations at 1400 MHz, the rest at 1410 (not profiled, not priced).
  const std::string plan = t.write("sched.json", R"([{"rank": 0, "power_states": [1410, 1400, 1410, 1410, 1400, 1410,
      1400, 1410, 1400, 1410, 1410, 1410]}, {"rank": 1, "power_states": [1410, 1410, 1400, 1400, 1410, 1410, 1400, 1400,
      1410, 1410, 1410, 1410]}])");
  Result r = run("pipeline " + prof + " --evaluate " + plan + " --blocking-power-w 50 -o " + (t.dir / "o").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(Perseus sched.json)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pipeline 1f1b S=2 M=2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MODELLED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("left-out time (sends/receives, loads, optimizer step, syncs): absent"), std::string::npos)
      << r.out;
  // F 10, B 20 on rank 0 and 21 on rank 1 units: rank 1 F0 10-20, B0 20-41, F1 41-51, B1 51-72; rank 0 B0 41-61,
  // B1 72-92. Compute 2·1.5 + 2·3.0 + 2·1.5 + 2·(4.2 − 1.05) = 18.3 J; blocking 2·0.092·50 = 9.2 J.
  EXPECT_NE(r.out.find("plan plan: iteration 0.0920 s, energy 27.50 J (compute 18.30 J + blocking 9.20 J)"),
            std::string::npos)
      << r.out;
  std::ifstream f(t.dir / "o" / "evaluation.json");
  ASSERT_TRUE(f.good());
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["plans"][0]["iteration_units"], 92);
  EXPECT_NEAR(j["plans"][0]["ranks"][1]["idle_s"].get<double>(), 0.092 - 0.062, 1e-12);
}

// A measured prof.json of S = 2, M = 2 (Perseus format): forward 10 ms, backward 20 ms on rank 0 and 21 ms on rank 1,
// no loads, iteration `iter_s` (the first of the three iterations is warm-up).
std::string measured_prof(double iter_s, int ranks = 2) {
  nlohmann::json j = nlohmann::json::array();
  for (int r = 0; r < ranks; ++r) {
    const double b = r ? 0.021 : 0.020;
    j.push_back({{"rank", r},
                 {"iter_time", {1.0, iter_s, iter_s}},
                 {"iter_energy", {100.0, 10.0, 10.0}},
                 {"time_breakdown",
                  {{"forward", {{0.010, 0.010}, {0.010, 0.010}, {0.010, 0.010}}},
                   {"backward", {{b, b}, {b, b}, {b, b}}},
                   {"load", {{0.0, 0.0}, {0.0, 0.0}, {0.0, 0.0}}}}}});
  }
  return j.dump();
}

TEST(PipelineEvaluateCli, OverheadFromAMeasuredRun) {
  TmpDir t;
  const std::string prof = t.write("tiny.csv", kTiny);
  const std::string plan = t.write("sched.json", R"([{"rank": 0, "power_states": [1410, 1400, 1410, 1410, 1400, 1410,
      1400, 1410, 1400, 1410, 1410, 1410]}, {"rank": 1, "power_states": [1410, 1410, 1400, 1400, 1410, 1410, 1400, 1400,
      1410, 1410, 1410, 1410]}])");
  // The measured times give the same graph as the plan's (0.092 s); measured 0.100 s: overhead 8 ms, which adds
  // 2 GPUs x 8 ms x 50 W = 0.80 J of waiting to the 27.50 J of the compute-only graph.
  const std::string measured = t.write("0.prof.json", measured_prof(0.100));
  Result r = run("pipeline " + prof + " --evaluate " + plan + " --blocking-power-w 50 --overhead-from " + measured);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("overhead 0.0080 s per iteration fitted from " + measured +
                       " (MEASURED iteration 0.1000 s, its graph 0.0920 s, 2 cross-stage edges on its longest path)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("plan plan: iteration 0.1000 s, energy 28.30 J (compute 18.30 J + blocking 10.00 J)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("of which left out by the graph: 0.0080 s, 0.80 J"), std::string::npos) << r.out;
  // A given lag of 1 ms on each of the 2 crossings leaves 6 ms of overhead; the plan's graph crosses as often.
  r = run("pipeline " + prof + " --evaluate " + plan + " --blocking-power-w 50 --json --lag-ms 1 --overhead-from " +
          measured);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = json_of(r);
  EXPECT_NEAR(j["left_out_time"]["overhead_s"].get<double>(), 0.006, 1e-12);
  EXPECT_NEAR(j["plans"][0]["iteration_time_s"].get<double>(), 0.100, 1e-12);
  EXPECT_EQ(j["left_out_time"]["lag_fitted"], false);

  // Bad inputs: one line naming the file; options out of place exit 2.
  nlohmann::json broken = nlohmann::json::parse(measured_prof(0.1));
  broken[1].erase("iter_time");
  const std::string missing = t.write("m.json", broken.dump());
  r = run("pipeline " + prof + " --evaluate " + plan + " --overhead-from " + missing);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("--overhead-from " + missing + ": rank 1 has no \"iter_time\""), std::string::npos) << r.out;
  const std::string three = t.write("three.json", measured_prof(0.1, 3));
  r = run("pipeline " + prof + " --evaluate " + plan + " --overhead-from " + three);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find(three + ": 3 ranks measured; the pipeline has 2 stages"), std::string::npos) << r.out;
  r = run("pipeline " + prof + " --evaluate " + plan + " --overhead-from " + (t.dir / "none.json").string());
  EXPECT_EQ(r.code, 3) << r.out;
  r = run("pipeline " + prof + " --evaluate " + plan + " --lag-ms 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--lag-ms needs --overhead-from"), std::string::npos) << r.out;
  r = run("pipeline " + prof + " --stages 2 --microbatches 2 -o " + (t.dir / "x").string() + " --overhead-from " +
          measured);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--overhead-from needs --evaluate"), std::string::npos) << r.out;
}

TEST(PipelineProfileCli, BadFoldersAndLeaveOuts) {
  TmpDir t;
  Result r = run("pipeline-profile " + (t.dir / "nothing").string() + " -o " + (t.dir / "p.csv").string());
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("not a directory of measured plans"), std::string::npos) << r.out;
  r = run("pipeline-profile " + t.dir.string() + " -o " + (t.dir / "p.csv").string());
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("no N.prof.json(.gz) + N.sched.json(.gz) plans to use"), std::string::npos) << r.out;
  t.write("0.prof.json", measured_prof(0.1));
  r = run("pipeline-profile " + t.dir.string() + " --leave-out 7 -o " + (t.dir / "p.csv").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--leave-out 7: no plan 7 in"), std::string::npos) << r.out;
  r = run("pipeline-profile " + t.dir.string() + " -o " + (t.dir / "p.csv").string());
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("plan 0 has a prof.json but no sched.json"), std::string::npos) << r.out;
}

// On the shared measured BERT plans: a profile from all but plan 5 that `pipeline --evaluate` reads back.
TEST(PipelineProfileCli, ProfileFromTheMeasuredPerseusPlans) {
  const std::string dir = std::string(GEARSHIFT_SHARED_DIR) + "/data/perseus_measured/perseus/A100/bert-huge-uncased";
  if (!fs::exists(dir)) GTEST_SKIP() << "shared measured Perseus data not found at " << dir;
  TmpDir t;
  const std::string csv = (t.dir / "bert.csv").string();
  Result r = run("pipeline-profile " + dir + " --leave-out 5 -o " + csv + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = json_of(r);
  EXPECT_EQ(j["plans_used"].size(), 29u);
  EXPECT_EQ(j["left_out"], nlohmann::json::array({5}));
  const double p = j["blocking_power_w"].get<double>();
  EXPECT_GT(p, 30);  // an A100 waiting draws tens of W; the 300 W limit bounds everything
  EXPECT_LT(p, 300);
  r = run("pipeline " + csv + " --evaluate " + dir + "/5.sched.json.gz --time-unit-ms 0.01 --blocking-power-w " +
          std::to_string(p) + " --overhead-from " + dir + "/0.prof.json.gz --json");
  ASSERT_EQ(r.code, 0) << r.out;
  // Plan 5 MEASURED 6.8438 s and 5866.5 J per iteration (mean of its iterations after the first, 4 GPUs); the
  // prediction from the other 29 plans is within the issue's 1.5 % and 2 % (it gives 6.8282 s, 5860 J).
  const auto e = json_of(r)["plans"][0];
  EXPECT_NEAR(e["iteration_time_s"].get<double>(), 6.8438, 0.015 * 6.8438);
  EXPECT_NEAR(e["energy_j"].get<double>(), 5866.5, 0.02 * 5866.5);
  EXPECT_GT(e["left_out_s"].get<double>(), 0.09);  // the overhead fitted from plan 0: 0.1029 s
}

TEST(PipelineEvaluateCli, BadPlansAndContradictionsExitWithOneLine) {
  TmpDir t;
  const std::string prof = t.write("tiny.csv", kTiny);
  const std::string empty = t.write("empty.json", "");
  Result r = run("pipeline " + prof + " --evaluate " + empty);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find(empty + ": empty file; expected gearshift's schedules.json"), std::string::npos) << r.out;
  const std::string wrong = t.write("w.py", "[[1400, 1400, 1400], [1400, 1400, 1400, 1400]]");
  r = run("pipeline " + prof + " --evaluate " + wrong + " --microbatches 2");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("rank 0: 3 computations; the DAG of 2 stages x 2 microbatches runs 4"), std::string::npos)
      << r.out;
  const std::string ok = t.write("ok.py", "[[1400, 1400, 1400, 1400], [1400, 1400, 1400, 1400]]");
  r = run("pipeline " + prof + " --evaluate " + ok + " --stages 3");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--stages 3 contradicts the plan lowtime freqs (2)"), std::string::npos) << r.out;
  r = run("pipeline " + prof + " --evaluate " + ok + " --schedule gpipe");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run("pipeline " + prof + " --evaluate " + (t.dir / "missing.json").string());
  EXPECT_EQ(r.code, 3) << r.out;
  // Without --evaluate, the shape and -o stay required.
  r = run("pipeline " + prof + " --microbatches 2 -o " + (t.dir / "x").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--stages is required (without --evaluate)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gearshift
